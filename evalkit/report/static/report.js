// primekit report: sortable tables, row links, and the rollout browser (search, filters, pages).
// Plain DOM, no libraries; every text from a run is set with textContent, never parsed as HTML.
"use strict";

(function sortableTables() {
  function cellValue(row, index, numeric) {
    const cell = row.cells[index];
    if (!cell) return numeric ? NaN : "";
    const raw = cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent.trim();
    return numeric ? (raw === "" ? NaN : parseFloat(raw)) : raw.toLowerCase();
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    const headers = table.tHead ? Array.from(table.tHead.rows[0].cells) : [];
    headers.forEach(function (th, index) {
      th.addEventListener("click", function () {
        const numeric = th.getAttribute("data-type") === "num";
        const ascending = th.getAttribute("aria-sort") !== "ascending";
        headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        const body = table.tBodies[0];
        const rows = Array.from(body.rows).filter(function (r) { return !r.classList.contains("prompt-row"); });
        rows.sort(function (a, b) {
          const x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
          if (numeric) {
            if (isNaN(x) && isNaN(y)) return 0;
            if (isNaN(x)) return 1;  // missing values last either way
            if (isNaN(y)) return -1;
            return ascending ? x - y : y - x;
          }
          return ascending ? x.localeCompare(y) : y.localeCompare(x);
        });
        rows.forEach(function (row) {
          body.appendChild(row);
          const detail = row.getAttribute("data-target") && document.getElementById(row.getAttribute("data-target"));
          if (detail) body.appendChild(detail);
        });
      });
    });
  });
  document.querySelectorAll("tr[data-target]").forEach(function (row) {
    row.addEventListener("click", function () {
      const detail = document.getElementById(row.getAttribute("data-target"));
      if (detail) detail.hidden = !detail.hidden;
    });
  });
})();

(function rolloutBrowser() {
  const source = document.getElementById("rollout-data");
  const list = document.getElementById("rollout-list");
  if (!source || !list) return;
  const data = JSON.parse(source.textContent);
  const rows = data.rows;
  const perPage = 10;  // groups (an example, or an example at one step) per page
  let page = 0;
  const $ = function (id) { return document.getElementById(id); };
  const controls = ["f-search", "f-run", "f-step", "f-example", "f-min", "f-max", "f-errors", "f-order"]
    .map($).filter(Boolean);

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function fmt(value, digits) {
    return value === null || value === undefined ? "n/a" : Number(value).toFixed(digits === undefined ? 3 : digits);
  }

  (function fillSelects() {
    const runSelect = $("f-run");
    if (runSelect) data.runs.forEach(function (label, i) { runSelect.appendChild(new Option(label, String(i))); });
    const stepSelect = $("f-step");
    if (stepSelect) {
      const steps = Array.from(new Set(rows.map(function (r) { return r.s; }))).filter(function (s) { return s !== undefined; });
      steps.sort(function (a, b) { return a - b; }).forEach(function (s) { stepSelect.appendChild(new Option("step " + s, String(s))); });
    }
  })();

  function searchText(row) {
    if (row._text === undefined) {
      const parts = [row.a || "", row.err || ""];
      (data.prompts[row.p] || []).concat(row.c || []).forEach(function (m) {
        parts.push(m.text || "");
        (m.calls || []).forEach(function (c) { parts.push(c.name, c.args); });
      });
      row._text = parts.join("\n").toLowerCase();
    }
    return row._text;
  }

  function filtered() {
    const query = ($("f-search").value || "").trim().toLowerCase();
    const run = $("f-run") ? $("f-run").value : "";
    const step = $("f-step") ? $("f-step").value : "";
    const example = $("f-example").value.trim();
    const min = $("f-min").value === "" ? null : parseFloat($("f-min").value);
    const max = $("f-max").value === "" ? null : parseFloat($("f-max").value);
    const errorsOnly = $("f-errors").checked;
    return rows.filter(function (r) {
      if (run !== "" && String(r.r) !== run) return false;
      if (step !== "" && String(r.s) !== step) return false;
      if (example !== "" && String(r.e) !== example) return false;
      if (min !== null && !(r.rw !== null && r.rw >= min)) return false;
      if (max !== null && !(r.rw !== null && r.rw <= max)) return false;
      if (errorsOnly && !r.err) return false;
      if (query && searchText(r).indexOf(query) < 0) return false;
      return true;
    });
  }

  function groups(items) {
    const byKey = new Map();
    items.forEach(function (r) {
      const key = (r.s !== undefined ? r.s + ":" : "") + r.e;
      if (!byKey.has(key)) byKey.set(key, { step: r.s, example: r.e, rows: [] });
      byKey.get(key).rows.push(r);
    });
    const out = Array.from(byKey.values());
    out.forEach(function (g) {
      const rewards = g.rows.map(function (r) { return r.rw || 0; });
      g.mean = rewards.reduce(function (a, b) { return a + b; }, 0) / rewards.length;
    });
    const order = $("f-order").value;
    out.sort(function (a, b) {
      if (order === "asc" && a.mean !== b.mean) return a.mean - b.mean;
      if (order === "desc" && a.mean !== b.mean) return b.mean - a.mean;
      return (a.step || 0) - (b.step || 0) || a.example - b.example;
    });
    return out;
  }

  function renderMessage(m) {
    const box = el("div", "msg " + m.role);
    box.appendChild(el("div", "role", m.role + (m.id ? " · " + m.id : "")));
    if (m.text) box.appendChild(el("pre", "", m.text));
    (m.calls || []).forEach(function (c) {
      box.appendChild(el("div", "call mono", "tool call " + c.name + "(" + c.args + ")" + (c.id ? "  [" + c.id + "]" : "")));
    });
    return box;
  }

  function renderRollout(r) {
    const box = el("div", "rollout");
    box.setAttribute("data-rollout", r.r + ":" + (r.s !== undefined ? r.s + ":" : "") + r.e + ":" + r.i);
    const head = el("div", "rhead");
    head.appendChild(el("span", "", "rollout " + r.i));
    head.appendChild(el("span", "reward", "reward " + fmt(r.rw, 4)));
    Object.keys(r.m || {}).forEach(function (k) { head.appendChild(el("span", "chip", k + " " + fmt(r.m[k]))); });
    if (r.st) head.appendChild(el("span", "chip", r.st + (r.tr ? " (truncated)" : "")));
    if (r.k !== undefined) head.appendChild(el("span", "chip", r.k ? "kept" : "filtered out"));
    if (r.adv !== undefined && r.adv !== null) head.appendChild(el("span", "chip", "advantage " + fmt(r.adv)));
    if (r.tk && r.tk[1] !== null && r.tk[1] !== undefined) head.appendChild(el("span", "chip", r.tk[0] + " → " + r.tk[1] + " tokens"));
    if (r.err) head.appendChild(el("span", "chip bad", "error: " + (r.ek || "")));
    box.appendChild(head);
    if (r.err) box.appendChild(el("div", "err mono", r.err));
    const prompt = el("details");
    prompt.appendChild(el("summary", "", "prompt (" + (data.prompts[r.p] || []).length + " messages)"));
    (data.prompts[r.p] || []).forEach(function (m) { prompt.appendChild(renderMessage(m)); });
    box.appendChild(prompt);
    (r.c || []).forEach(function (m) { box.appendChild(renderMessage(m)); });
    if (!(r.c || []).length) box.appendChild(el("div", "empty", "(no completion)"));
    if (r.a) box.appendChild(el("div", "answer", "answer: " + r.a));
    return box;
  }

  function renderGroup(g, runsShown) {
    const box = el("div", "group");
    const head = el("div", "ghead");
    head.appendChild(el("b", "", (g.step !== undefined ? "step " + g.step + " · " : "") + "example " + g.example));
    head.appendChild(el("span", "q", "mean reward " + fmt(g.mean)));
    const first = g.rows[0];
    const question = (data.prompts[first.p] || []).filter(function (m) { return m.role === "user"; }).pop();
    if (question) head.appendChild(el("span", "q", question.text.length > 200 ? question.text.slice(0, 200) + "…" : question.text));
    box.appendChild(head);
    const cols = el("div", "gcols");
    cols.style.gridTemplateColumns = "repeat(" + runsShown.length + ", minmax(0, 1fr))";
    runsShown.forEach(function (runIndex) {
      const col = el("div", "gcol");
      if (data.runs.length > 1) col.appendChild(el("div", "colhead", data.runs[runIndex]));
      const mine = g.rows.filter(function (r) { return r.r === runIndex; });
      if (!mine.length) col.appendChild(el("div", "empty", "no matching rollout"));
      mine.sort(function (a, b) { return a.i - b.i; }).forEach(function (r) { col.appendChild(renderRollout(r)); });
      cols.appendChild(col);
    });
    box.appendChild(cols);
    return box;
  }

  function render() {
    const items = filtered();
    const all = groups(items);
    const pages = Math.max(1, Math.ceil(all.length / perPage));
    page = Math.min(Math.max(0, page), pages - 1);
    const run = $("f-run") ? $("f-run").value : "";
    const runsShown = run !== "" ? [parseInt(run, 10)] : data.runs.map(function (_, i) { return i; });
    list.replaceChildren();
    all.slice(page * perPage, (page + 1) * perPage).forEach(function (g) { list.appendChild(renderGroup(g, runsShown)); });
    if (!all.length) list.appendChild(el("div", "empty", "No rollout matches these filters."));
    const info = items.length + " of " + rows.length + " rollouts · page " + (page + 1) + " of " + pages;
    document.querySelectorAll(".pageinfo").forEach(function (n) { n.textContent = info; });
    document.querySelectorAll(".pager .prev").forEach(function (b) { b.disabled = page === 0; });
    document.querySelectorAll(".pager .next").forEach(function (b) { b.disabled = page >= pages - 1; });
  }

  controls.forEach(function (c) {
    c.addEventListener(c.tagName === "SELECT" || c.type === "checkbox" ? "change" : "input", function () { page = 0; render(); });
  });
  document.querySelectorAll(".pager .prev").forEach(function (b) { b.addEventListener("click", function () { page -= 1; render(); }); });
  document.querySelectorAll(".pager .next").forEach(function (b) { b.addEventListener("click", function () { page += 1; render(); }); });
  $("f-reset").addEventListener("click", function () {
    controls.forEach(function (c) { if (c.type === "checkbox") c.checked = false; else if (c.tagName === "SELECT") c.selectedIndex = 0; else c.value = ""; });
    page = 0;
    render();
  });
  document.querySelectorAll("tr[data-example]").forEach(function (row) {
    row.addEventListener("click", function () {
      $("f-example").value = row.getAttribute("data-example");
      page = 0;
      render();
      $("rollouts").scrollIntoView();
    });
  });
  render();
})();
