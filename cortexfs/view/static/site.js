/* cortex view: what every page shares — data loading, sortable and filterable tables.
   Values from the store are only ever set as text (textContent), never as HTML. */
"use strict";
(function () {
  var loaded = Object.create(null);
  var waiting = Object.create(null);

  // A data file (data/<name>.js) calls this with its value; see cortexfs/view/escape.py.
  window.cortexData = function (name, value) {
    loaded[name] = value;
    (waiting[name] || []).forEach(function (w) { w.resolve(value); });
    delete waiting[name];
  };

  // Load a data file with a script tag (fetch cannot read file:// pages' neighbours).
  window.cortexLoad = function (name) {
    if (name in loaded) return Promise.resolve(loaded[name]);
    return new Promise(function (resolve, reject) {
      var first = !(name in waiting);
      (waiting[name] = waiting[name] || []).push({ resolve: resolve, reject: reject });
      if (!first) return;
      var script = document.createElement("script");
      script.src = document.body.dataset.root + "data/" +
        name.split("/").map(encodeURIComponent).join("/") + ".js";
      script.onerror = function () {
        (waiting[name] || []).forEach(function (w) { w.reject(new Error("cannot load " + name)); });
        delete waiting[name];
      };
      document.head.appendChild(script);
    });
  };

  window.cortexText = function (tag, text, cls) {
    var el = document.createElement(tag);
    if (text !== undefined && text !== null) el.textContent = String(text);
    if (cls) el.className = cls;
    return el;
  };

  function idKey(text) {
    var m = /^([A-Z]+)-(\d+)([a-z]?)$/.exec(text);
    return m ? [m[1], parseInt(m[2], 10), m[3]] : [text, 0, ""];
  }

  function compare(a, b, type) {
    if (type === "num") return (parseFloat(a) || 0) - (parseFloat(b) || 0);
    if (type === "id") {
      var x = idKey(a), y = idKey(b);
      return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] - y[1] || (x[2] < y[2] ? -1 : x[2] > y[2] ? 1 : 0);
    }
    return a.localeCompare(b);
  }

  function sortable(table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, column) {
      th.tabIndex = 0;
      th.classList.add("sort");
      var sort = function () {
        var body = table.tBodies[0];
        var descending = th.getAttribute("aria-sort") === "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        var rows = Array.prototype.slice.call(body.rows);
        var type = th.dataset.type || "text";
        var keyed = rows.map(function (row) { return [row.cells[column].textContent.trim(), row]; });
        keyed.sort(function (a, b) { var c = compare(a[0], b[0], type); return descending ? -c : c; });
        var frag = document.createDocumentFragment();
        keyed.forEach(function (k) { frag.appendChild(k[1]); });
        body.appendChild(frag);
      };
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
    });
  }

  function filterable(box) {
    var table = document.getElementById(box.dataset.for);
    if (!table) return;
    var fields = {};
    box.querySelectorAll("[data-filter]").forEach(function (el) { fields[el.dataset.filter] = el; });
    var shown = box.querySelector(".shown");
    var apply = function () {
      var status = fields.status.value, tag = fields.tag.value.trim().toLowerCase();
      var text = fields.text.value.trim().toLowerCase();
      var rows = table.tBodies[0].rows, count = 0;
      Array.prototype.forEach.call(rows, function (row) {
        var ok = (!status || row.dataset.status === status) &&
          (!tag || row.dataset.tags.toLowerCase().split("\n").some(function (t) { return t === tag; })) &&
          (!text || (row.cells[0].textContent + " " + row.cells[2].textContent).toLowerCase().indexOf(text) >= 0);
        row.hidden = !ok;
        count += ok ? 1 : 0;
      });
      if (shown) shown.textContent = (status || tag || text) ? count + " of " + rows.length + " shown" : "";
    };
    Object.keys(fields).forEach(function (k) { fields[k].addEventListener("input", apply); });
    box.cortexFilter = function (name, value) {
      var field = fields[name];
      if (!field) return;
      if (field.tagName === "SELECT" && value && !Array.prototype.some.call(
        field.options, function (o) { return o.value === value; })) {
        field.appendChild(cortexText("option", value));  // no atom has it: show none
      }
      field.value = value;
      apply();
    };
  }

  // project pages: #tag=x, #status=y (or both) set the filters of every atom table
  function fromHash() {
    if (!/(^|&|#)(tag|status)=/.test(location.hash)) return;
    var params = new URLSearchParams(location.hash.slice(1));
    document.querySelectorAll(".filters").forEach(function (box) {
      ["tag", "status"].forEach(function (name) {
        if (box.cortexFilter) box.cortexFilter(name, params.get(name) || "");
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table.sortable").forEach(sortable);
    document.querySelectorAll(".filters").forEach(filterable);
    fromHash();
    window.addEventListener("hashchange", fromHash);
  });
})();
