/* cortex view: search over the prebuilt index of cortexfs/view/search.py.
   A query word matches the index terms it starts (an exact term counts double); every
   word must match; hits are ranked by the fields they match in, weighted by rarity. */
"use strict";
(function () {
  var input = document.getElementById("q");
  if (!input) return;
  var status = document.getElementById("search-status");
  var list = document.getElementById("results");
  var ID_WORD = /^(exp|k|pat)-\d+[a-z]?$/;
  var LIMIT = 100;
  var meta = null, sequence = 0;

  function bucket(term) {
    return Array.from(term).slice(0, 2).map(function (c) {
      return /^[a-z0-9]$/.test(c) ? c : "_" + c.codePointAt(0).toString(16);
    }).join("");
  }

  function words(query) {
    var out = [];
    query.toLowerCase().split(/\s+/).forEach(function (part) {
      if (ID_WORD.test(part)) { out.push(part); return; }
      (part.match(/[\p{L}\p{N}_]+/gu) || []).forEach(function (w) {
        var n = Array.from(w).length;
        if (n >= meta.min && n <= meta.max && meta.stopwords.indexOf(w) < 0 && out.indexOf(w) < 0) out.push(w);
      });
    });
    return out;
  }

  function weight(mask) {
    var f = meta.fields;
    return (mask & f.id ? 6 : 0) + (mask & f.summary ? 3 : 0) + (mask & f.tags ? 2 : 0) + (mask & f.body ? 1 : 0);
  }

  function tables(word) {
    var b = bucket(word), names = [];
    Object.keys(meta.segments).forEach(function (seg) {
      if (meta.segments[seg].indexOf(b) >= 0) names.push("search/s" + seg + "/" + b);
    });
    return Promise.all(names.map(cortexLoad));
  }

  function score(word, loadedTables) {
    var df = Object.create(null), scores = new Map();
    loadedTables.forEach(function (table) {
      Object.keys(table).forEach(function (term) {
        if (term.lastIndexOf(word, 0) === 0) df[term] = (df[term] || 0) + table[term].length / 2;
      });
    });
    loadedTables.forEach(function (table) {
      Object.keys(df).forEach(function (term) {
        var postings = table[term];
        if (!postings) return;
        var idf = Math.log(1 + meta.docs / df[term]) * (term === word ? 2 : 1);
        for (var i = 0; i < postings.length; i += 2) {
          var s = weight(postings[i + 1]) * idf;
          if (s > (scores.get(postings[i]) || 0)) scores.set(postings[i], s);
        }
      });
    });
    return scores;
  }

  function show(hits, total, query) {
    var segs = {};
    hits.forEach(function (h) { segs[Math.floor(h[0] / meta.segment)] = true; });
    return Promise.all(Object.keys(segs).map(function (s) {
      return cortexLoad("search/docs-" + s).then(function (rows) { return [s, rows]; });
    })).then(function (loaded) {
      var docs = {};
      loaded.forEach(function (l) { docs[l[0]] = l[1]; });
      list.textContent = "";
      hits.forEach(function (h) {
        var row = docs[Math.floor(h[0] / meta.segment)][h[0] % meta.segment];
        if (!row) return;
        var li = document.createElement("li");
        var a = cortexText("a", row[2], "atom-ref");
        a.href = "p/" + encodeURIComponent(row[0]) + "/" + encodeURIComponent(row[1]) + ".html";
        li.appendChild(a);
        li.appendChild(cortexText("span", row[5], "status st-" + row[5]));
        li.appendChild(cortexText("span", row[0], "project"));
        li.appendChild(cortexText("span", row[4], "summary"));
        list.appendChild(li);
      });
      status.textContent = total === 0 ? "No atom matches \u201c" + query + "\u201d." :
        total + " atom" + (total === 1 ? "" : "s") + " match" + (total === 1 ? "es" : "") +
        (total > hits.length ? " (the best " + hits.length + " shown)" : "") + ".";
      document.body.dataset.searchDone = query;
    });
  }

  function run(query) {
    var mine = ++sequence;
    var ws = words(query);
    if (!ws.length) {
      list.textContent = "";
      status.textContent = query.trim() ? "Type words of two letters or more." : "";
      document.body.dataset.searchDone = query;
      return;
    }
    Promise.all(ws.map(function (w) {
      return tables(w).then(function (t) { return score(w, t); });
    })).then(function (perWord) {
      if (mine !== sequence) return;
      var total = new Map(perWord[0]);
      perWord.slice(1).forEach(function (scores) {
        total.forEach(function (s, doc) {
          if (scores.has(doc)) total.set(doc, s + scores.get(doc)); else total.delete(doc);
        });
      });
      var hits = Array.from(total.entries()).sort(function (a, b) { return b[1] - a[1] || a[0] - b[0]; });
      return show(hits.slice(0, LIMIT), hits.length, query);
    }).catch(function (e) {
      status.textContent = "The search index could not be read (" + e.message + "): run `cortex view` again.";
    });
  }

  var timer = null;
  cortexLoad("search/index").then(function (m) {
    meta = m;
    input.value = new URLSearchParams(location.search).get("q") || "";
    run(input.value);
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        try { history.replaceState(null, "", "?q=" + encodeURIComponent(input.value)); } catch (e) { /* file:// */ }
        run(input.value);
      }, 150);
    });
  }, function () {
    status.textContent = "The search index is missing: run `cortex view` again.";
  });
})();
