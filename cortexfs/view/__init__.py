"""`cortex view`: the store as a static, offline HTML site.

Pages: the store (projects, totals, HIPPOCAMPUS.md's decay queue), each project (STATUS.md,
mission and roadmap, the TASKS.yaml board, sortable and filterable atom tables, a timeline
of experiments, the heat of reads), each atom (its body, frontmatter card, backlinks,
evidence chain and read history), a graph per project, and search. Modules:

- model: what the site shows, read through the library (loader, index context, tasks,
  governance, hippocampus) and history (reads per day from the access logs);
- pages: each page's data, key and rendering (templates/view/, sandboxed and escaped;
  an atom page's main part as strings);
  markdown and charts render what is HTML already (every value through cortexfs.escape);
- search: the sharded, incremental index the browser queries;
- site: the output folder, its manifest of page keys, atomic writes and the sweep;
- build: puts it together, rewriting only the pages whose inputs changed;
- server: `--serve`, read-only, on loopback only.

The entry point is `cortexfs.view.build.build`. Nothing here is imported by
`cortex --help`: the command imports it when it runs.
"""

# No inline script, no remote anything: the site works offline and a planted `<script>` or
# `onerror=` would not run even if it escaped escaping (cortexfs.escape.html) and reached the
# page. (Inline styles stay allowed: the vendored graph library injects its stylesheet.)
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; base-uri 'none'; form-action 'self'")
