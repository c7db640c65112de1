/* cortex view: a project's atoms and what cites what, drawn with force-graph (vendored:
   assets/vendor/force-graph.min.js). A large project shows its hottest atoms and their
   neighbours first; more on demand (the size menu, "expand", "find"). Store values are
   only ever set as text. */
"use strict";
(function () {
  var page = document.querySelector(".graph-page");
  if (!page) return;
  var info = document.getElementById("graph-info");
  var counter = document.getElementById("graph-count");
  if (typeof ForceGraph === "undefined") {
    info.textContent = "The graph library did not load (assets/vendor/force-graph.min.js).";
    return;
  }
  var KIND_COLOURS = ["59,130,246", "22,163,74", "147,51,234"];
  var EDGE_COLOURS = ["rgba(51,65,85,0.55)", "rgba(234,88,12,0.65)", "rgba(148,163,184,0.6)", "rgba(220,38,38,0.6)"];
  var EDGE_NAMES = ["evidence", "source experiment", "link", "named in status"];

  cortexLoad(page.dataset.graph).then(start, function (e) { info.textContent = e.message; });

  function start(data) {
    var nodes = data.nodes.map(function (n, i) {
      return { i: i, stem: n[0], id: n[1], kind: n[2], refs: n[3], group: n[4], cls: n[5], summary: n[6], day: n[7] };
    });
    var neighbours = nodes.map(function () { return []; });
    var links = data.edges.map(function (e) {
      neighbours[e[0]].push(e[1]);
      neighbours[e[1]].push(e[0]);
      return { source: nodes[e[0]], target: nodes[e[1]], type: e[2] };
    });
    var hottest = nodes.slice().sort(function (a, b) {
      return b.refs - a.refs || (a.day < b.day ? 1 : a.day > b.day ? -1 : 0) || a.i - b.i;
    });
    var shown = new Set();
    var el = document.getElementById("graph");
    var topSelect = document.getElementById("graph-top");
    var find = document.getElementById("graph-find");
    var ids = document.getElementById("graph-ids");
    var byId = Object.create(null);
    nodes.forEach(function (n) { byId[n.id.toLowerCase()] = n; });
    hottest.slice(0, 2000).forEach(function (n) {  // suggestions: a long list only slows typing
      var option = document.createElement("option");
      option.value = n.id;
      ids.appendChild(option);
    });

    function top(count) {
      shown = new Set();
      var base = count === "all" ? hottest : hottest.slice(0, parseInt(count, 10));
      base.forEach(function (n) { shown.add(n.i); });
      var cap = count === "all" ? nodes.length : base.length * 3;
      base.forEach(function (n) {
        neighbours[n.i].forEach(function (j) { if (shown.size < cap) shown.add(j); });
      });
    }

    function colour(n) {
      return "rgba(" + KIND_COLOURS[n.kind] + "," + (n.group === 0 ? 0.9 : 0.22) + ")";
    }

    function tooltip(n) {
      var box = document.createElement("div");
      box.appendChild(cortexText("strong", n.id));
      box.appendChild(cortexText("div", n.summary));
      return box;
    }

    var graph = new ForceGraph(el)
      .nodeId("i")
      .nodeVal(function (n) { return 1 + Math.sqrt(n.refs); })
      .nodeRelSize(3)
      .nodeColor(colour)
      .nodeLabel(tooltip)
      .linkColor(function (l) { return EDGE_COLOURS[l.type]; })
      .linkDirectionalArrowLength(function (l) { return l.type < 2 ? 3 : 0; })
      .linkDirectionalArrowRelPos(1)
      .nodeCanvasObjectMode(function () { return "after"; })
      .nodeCanvasObject(function (n, ctx, scale) {
        if (scale < 1.6 && n.refs < 5) return;
        ctx.font = (10 / scale) + "px sans-serif";
        ctx.fillStyle = n.group === 0 ? "#1e293b" : "#94a3b8";
        ctx.fillText(n.id, n.x + 4 + Math.sqrt(n.refs), n.y + 3 / scale);
      })
      .onNodeClick(select)
      .cooldownTime(6000)
      .width(el.clientWidth)
      .height(el.clientHeight);
    // a little gravity: atoms that cite nothing shown would otherwise drift out of sight
    var gravityNodes = [];
    var gravity = function (alpha) {
      gravityNodes.forEach(function (n) { n.vx -= n.x * 0.1 * alpha; n.vy -= n.y * 0.1 * alpha; });
    };
    gravity.initialize = function (ns) { gravityNodes = ns; };
    graph.d3Force("gravity", gravity);
    window.cortexGraph = graph;
    var fit = true;  // after the layout settles, once per new selection: show all of it
    graph.onEngineStop(function () {
      if (fit) graph.zoomToFit(400, 30);
      fit = false;
    });
    var drawn = false;
    graph.onRenderFramePost(function () {
      if (drawn) return;
      drawn = true;
      document.body.dataset.graphDrawn = String(graph.graphData().nodes.length);
    });

    function update() {
      var data = {
        nodes: nodes.filter(function (n) { return shown.has(n.i); }),
        links: links.filter(function (l) { return shown.has(l.source.i) && shown.has(l.target.i); })
      };
      fit = true;
      graph.warmupTicks(data.nodes.length > 2000 ? 0 : 40).graphData(data);
      counter.textContent = data.nodes.length + " of " + nodes.length + " atoms, " + data.links.length + " edges";
      document.body.dataset.graphNodes = String(data.nodes.length);
    }

    function select(n) {
      info.textContent = "";
      var title = cortexText("h2", "");
      var a = cortexText("a", n.id, "atom-ref");
      a.href = encodeURIComponent(n.stem) + ".html";
      title.appendChild(a);
      info.appendChild(title);
      info.appendChild(cortexText("p", n.summary));
      var facts = cortexText("p", "", "muted");
      facts.appendChild(cortexText("span", n.cls, "status st-" + n.cls));
      facts.appendChild(document.createTextNode(" " + (n.day || "undated") + " · " + n.refs + " reads"));
      info.appendChild(facts);
      var rels = cortexText("ul", "");
      links.forEach(function (l) {
        if (l.source !== n && l.target !== n) return;
        var other = l.source === n ? l.target : l.source;
        var li = cortexText("li", (l.source === n ? "cites (" : "cited by (") + EDGE_NAMES[l.type] + ") ");
        var link = cortexText("a", other.id, "atom-ref");
        link.href = encodeURIComponent(other.stem) + ".html";
        li.appendChild(link);
        rels.appendChild(li);
      });
      info.appendChild(rels);
      var expand = cortexText("button", "expand: show its " + neighbours[n.i].length + " neighbours");
      expand.type = "button";
      expand.addEventListener("click", function () {
        neighbours[n.i].forEach(function (j) { shown.add(j); });
        update();
        fit = false;  // keep the view where the reader is
      });
      info.appendChild(expand);
    }

    topSelect.addEventListener("change", function () { top(topSelect.value); update(); });
    find.addEventListener("change", function () {
      var n = byId[find.value.trim().toLowerCase()];
      if (!n) return;
      shown.add(n.i);
      neighbours[n.i].forEach(function (j) { shown.add(j); });
      update();
      fit = false;  // it zooms to the atom instead
      select(n);
      setTimeout(function () { graph.centerAt(n.x, n.y, 600); graph.zoom(4, 600); }, 400);
    });
    window.addEventListener("resize", function () { graph.width(el.clientWidth).height(el.clientHeight); });
    top(topSelect.value);
    update();
    if (!nodes.length) info.textContent = "This project has no atoms yet.";
  }
})();
