// Injected first into a copy of a report page by tests/chromium.py. It hears the page's
// console errors and failed loads; after "load" (every image decoded) it measures tables,
// cells and pictures, and only then adds the hidden <pre> holding the JSON, so that the
// <pre> cannot widen the page it measures.
(() => {
  const errors = [];
  const consoleError = console.error;
  console.error = (...args) => {
    errors.push(args.map(String).join(" "));
    consoleError(...args);
  };
  window.addEventListener("error", (e) => {
    const t = e.target;
    const failedLoad = t && t !== window;
    errors.push(failedLoad ? `failed to load <${t.tagName.toLowerCase()}>` : String(e.message));
  }, true);

  const size = (el) => {
    const r = el.getBoundingClientRect();
    return [r.width, r.height];
  };
  const firstRow = (t) => (t.rows[0] ? t.rows[0].textContent : "");
  const label = (t) => (t.caption ? t.caption.textContent : firstRow(t)).trim().slice(0, 80);
  const all = (selector) => [...document.querySelectorAll(selector)];

  window.addEventListener("load", () => {
    // Where each table and picture starts on the page as it opens (folded sections
    // closed): what the first screen shows. Then every fold is opened, so that what it
    // holds is measured too.
    const top = (el) => el.getBoundingClientRect().top + window.scrollY;
    const pictures = () => all("img, svg").filter((e) => !e.parentElement.closest("svg"));
    const tableTops = all("table").map(top);
    const pictureTops = pictures().map(top);
    const folds = all("details");
    const foldsOpen = folds.filter((d) => d.open).length;
    folds.forEach((d) => { d.open = true; });
    const result = {
      viewport_width_px: document.documentElement.clientWidth,
      scroll_width_px: document.documentElement.scrollWidth,
      folds: folds.length,
      folds_open: foldsOpen,
      tables: all("table").map((t, i) => ({width: size(t)[0], height: size(t)[1],
                                            label: label(t), top: tableTops[i]})),
      overflowing_cells: all("td, th")
        .filter((c) => c.scrollWidth > c.clientWidth + 1)
        .map((c) => c.textContent.slice(0, 80)),
      images: pictures().map((e, i) => ({size: size(e), top: pictureTops[i],
                                          alt: e.getAttribute("alt") || e.tagName})),
      // Links as the browser made them, and text that still reads as Markdown's syntax
      // (a link or stressed words that reached the page as raw text).
      links: all("a[href]").map((a) => ({
        text: a.textContent,
        href: a.getAttribute("href"),
        in_cell: Boolean(a.closest("td, th")),
        target_found: !a.getAttribute("href").startsWith("#")
          || Boolean(document.getElementById(a.getAttribute("href").slice(1))),
      })),
      raw_markdown: all("td, th, p, li, caption, figcaption, h1, h2, h3, h4, h5, h6")
        .filter((e) => /\[[^\]]+\]\([^)\s]+\)|\*\*[^*]+\*\*/.test(e.textContent))
        .map((e) => e.textContent.slice(0, 80)),
      console_errors: errors,
    };
    const pre = document.createElement("pre");
    pre.id = "pgdyno-measure";
    pre.hidden = true;
    pre.textContent = JSON.stringify(result);
    document.body.appendChild(pre);
  });
})();
