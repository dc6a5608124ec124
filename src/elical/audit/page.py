"""The labelling page: one self-contained HTML file (no network, no external script or style) that shows a
sheet's items one at a time, blind to the judges' decisions, and collects a person's labels by keyboard.

Keys: ``1`` right / the same answer, ``0`` wrong / different (either moves on to the next item), ``←``/``→``
or ``k``/``j`` move, a category's letter (shown on its button) sets the item's category, ``Backspace``
clears the item. Labels are kept in the browser's localStorage under a key made from the sheet's items,
so a reload (or reopening the file) resumes; "Download labels" saves ``labels.jsonl``, one line
``{"item", "label", "category"}`` per labelled item, in sheet order, which ``elical label-audit --labels``
reads back.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elical.audit.sample import CATEGORIES
from elical.core.io import atomic_write

# The only fields of a sheet row the page carries: nothing of the judge (judge, decision, stratum, weight).
BLIND_FIELDS = ("item", "task", "dataset", "question", "answer", "gold", "a", "b", "choices")
RESERVED_KEYS = set("jkx01")  # navigation, clearing and the two labels
PREFERRED_KEYS = {"plain": "p", "comparison": "c", "list": "l", "mentions-not-asserts": "m", "no-answer": "n",
                  "echo": "e", "alias": "a", "number-date": "d", "truncated": "t", "yes-no": "y", "other": "o"}


def category_keys(categories: Sequence[str] = CATEGORIES) -> dict[str, str]:
    """A letter key per category: its usual one, else the first free letter of its name (none if all are taken)."""
    keys: dict[str, str] = {}
    taken = set(RESERVED_KEYS)
    for name in categories:
        options = [PREFERRED_KEYS.get(name, "")] + [c for c in name.lower() if c.isalpha()]
        key = next((c for c in options if c and c not in taken), "")
        keys[name] = key
        taken.add(key)
    return keys


def sheet_key(rows: Sequence[dict[str, Any]]) -> str:
    """A short id of the sheet's items (in order): labels in the browser are stored under it, so another
    sheet never resumes this one's labels."""
    return hashlib.sha1("\n".join(str(r["item"]) for r in rows).encode()).hexdigest()[:12]


def page_data(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the page needs of a sheet: the blind fields of each item, labels already on the sheet, the
    categories and their keys, and the storage key."""
    items = []
    for row in rows:
        item = {k: row[k] for k in BLIND_FIELDS if row.get(k) is not None}
        if row.get("label") in (0, 1):  # a sheet already (partly) labelled by hand starts with those labels
            item["label"] = int(row["label"])
        if row.get("category"):
            item["category"] = row["category"]
        items.append(item)
    return {"key": f"elical-label-audit/{sheet_key(rows)}", "items": items,
            "categories": [[name, key] for name, key in category_keys().items()]}


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element ('<', '>' and '&' escaped, so no text can end the element)."""
    text = json.dumps(data, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f4f5f7;color:#1f2328;
  line-height:1.45}
header{background:#fff;border-bottom:1px solid #d8dce1;padding:10px 24px;display:flex;align-items:center;gap:18px;
  position:sticky;top:0;z-index:1}
header h1{font-size:17px;margin:0;font-weight:600}
#progress{font-size:14px;color:#444;margin-left:auto}
#bar{width:160px;height:8px;background:#e4e7eb;border-radius:4px;overflow:hidden}
#bar div{height:100%;background:#2f9e44;width:0}
main{max-width:860px;margin:18px auto;padding:0 16px}
.card{background:#fff;border:1px solid #d8dce1;border-radius:8px;padding:18px 22px}
.meta{font-size:13px;color:#666;display:flex;gap:12px;flex-wrap:wrap;align-items:center}
.meta code{background:#f0f1f3;padding:1px 5px;border-radius:3px}
.ask{font-size:18px;font-weight:600;margin:8px 0 12px}
h3{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:#6a737d;margin:14px 0 4px}
.text{white-space:pre-wrap;word-wrap:break-word;font-size:16px}
.reply{background:#f6f8fa;border:1px solid #e1e4e8;border-radius:6px;padding:8px 12px}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:14px}
ol.choices{margin:4px 0;padding-left:28px}ol.choices li{padding:1px 6px;border-radius:4px}
ol.choices li.gold{background:#e7f5ff;outline:1px solid #a5d8ff}
ol.choices li.gold::after{content:"  ← gold";color:#1971c2;font-size:12px}
ul.gold{list-style:none;margin:4px 0;padding:0;display:flex;flex-wrap:wrap;gap:6px}
ul.gold li{background:#e7f5ff;border:1px solid #a5d8ff;border-radius:12px;padding:1px 10px;font-size:14px}
.status{margin-left:auto;font-size:14px;padding:6px 12px;border-radius:6px;background:#f0f1f3;color:#555}
.status.yes{background:#d3f9d8;color:#1b5e20}.status.no{background:#ffe3e3;color:#8a1c1c}
.buttons{display:flex;gap:10px;flex-wrap:wrap;align-items:center;margin:18px 0 6px;padding-top:14px;
  border-top:1px solid #eceef1}
button{font:inherit;font-size:14px;border:1px solid #c4c9d0;background:#fff;border-radius:6px;padding:6px 14px;
  cursor:pointer}
button:hover{background:#f3f4f6}
button.label{font-size:16px;padding:8px 22px}
button.label.yes.on{background:#2f9e44;border-color:#2f9e44;color:#fff}
button.label.no.on{background:#e03131;border-color:#e03131;color:#fff}
button.primary{background:#1c7ed6;border-color:#1c7ed6;color:#fff}
button.primary:hover{background:#1971c2}
.cats{display:flex;flex-wrap:wrap;gap:6px;margin:6px 0}
.cats button{font-size:13px;padding:3px 10px;border-radius:14px}
.cats button.on{background:#495057;border-color:#495057;color:#fff}
kbd{font-family:ui-monospace,monospace;font-size:12px;border:1px solid #c4c9d0;border-bottom-width:2px;
  border-radius:3px;padding:0 4px;background:#fafbfc;color:#333}
.cats button.on kbd{color:#333}
nav{display:flex;gap:10px;align-items:center;margin-top:14px}
#position{font-size:14px;color:#555}
.help{font-size:13px;color:#666;margin:14px 2px}
.warn{background:#fff3bf;border:1px solid #ffe066;padding:8px 12px;border-radius:6px;margin-bottom:12px}
[hidden]{display:none!important}
"""

SCRIPT = r"""
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("sheet").textContent);
  const items = DATA.items, N = items.length;
  const $ = (id) => document.getElementById(id);
  let store = {};  // item -> {label: 0|1|null, category: string|null}
  let persistent = true;
  try {
    store = JSON.parse(window.localStorage.getItem(DATA.key) || "{}") || {};
  } catch (err) {
    persistent = false;
  }
  for (const it of items) {  // labels already on the sheet, where the browser holds none
    if (store[it.item] === undefined && (it.label !== undefined || it.category !== undefined)) {
      store[it.item] = {label: it.label === undefined ? null : it.label, category: it.category || null};
    }
  }
  function save() {
    if (!persistent) return;
    try {
      window.localStorage.setItem(DATA.key, JSON.stringify(store));
    } catch (err) {
      persistent = false;
      $("storage-warning").hidden = false;
    }
  }
  $("storage-warning").hidden = persistent;
  const entry = (it) => store[it.item] || {label: null, category: null};
  const labelled = () => items.filter((it) => entry(it).label === 0 || entry(it).label === 1).length;
  const words = (it) => it.task === "correctness" ? ["right", "wrong"] : ["the same", "different"];
  let index = items.findIndex((it) => entry(it).label !== 0 && entry(it).label !== 1);
  if (index < 0) index = 0;

  const cats = $("categories");
  for (const [name, key] of DATA.categories) {
    const b = document.createElement("button");
    b.dataset.category = name;
    if (key) { const k = document.createElement("kbd"); k.textContent = key; b.append(k, " "); }
    b.append(name);
    b.addEventListener("click", () => setCategory(name));
    cats.append(b);
  }

  function fill(id, text) { $(id).textContent = text == null ? "" : String(text); }
  function list(id, values) {
    const el = $(id);
    el.replaceChildren(...values.map((v) => { const li = document.createElement("li"); li.textContent = String(v); return li; }));
  }
  function render() {
    if (N === 0) { $("card").hidden = true; $("empty").hidden = false; updateProgress(); return; }
    const it = items[index], e = entry(it), [yes, no] = words(it);
    fill("position", "item " + (index + 1) + " of " + N);
    fill("task", it.task);
    fill("dataset", it.dataset ? "dataset " + it.dataset : "");
    fill("item-id", it.item);
    fill("ask", it.task === "correctness" ? "Is the answer right, given the gold answers?"
                                          : "Do the two replies give the same answer to the question?");
    fill("question", it.question);
    $("choices-box").hidden = !(it.choices && it.choices.length);
    list("choices", it.choices || []);
    const correctness = it.task === "correctness";
    const golds = new Set((correctness ? [].concat(it.gold || []) : []).map((g) => String(g).trim().toLowerCase()));
    Array.from($("choices").children).forEach((li, i) => {
      const letter = String.fromCharCode(97 + i);
      li.classList.toggle("gold", golds.has(letter) || golds.has(li.textContent.trim().toLowerCase()));
    });
    $("answer-box").hidden = !correctness;
    $("gold-box").hidden = !correctness;
    $("pair-box").hidden = correctness;
    if (correctness) {
      fill("answer", it.answer);
      list("gold", Array.isArray(it.gold) ? it.gold : [it.gold]);
    } else {
      fill("reply-a", it.a);
      fill("reply-b", it.b);
    }
    fill("yes-word", yes);
    fill("no-word", no);
    $("yes").classList.toggle("on", e.label === 1);
    $("no").classList.toggle("on", e.label === 0);
    const status = $("status");
    status.className = "status" + (e.label === 1 ? " yes" : e.label === 0 ? " no" : "");
    status.textContent = e.label === 1 ? "Labelled: " + yes : e.label === 0 ? "Labelled: " + no : "Not labelled yet";
    if (e.category) status.textContent += " \u00b7 category: " + e.category;
    for (const b of cats.children) b.classList.toggle("on", b.dataset.category === e.category);
    $("prev").disabled = index === 0;
    $("next").disabled = index === N - 1;
    updateProgress();
  }
  function updateProgress() {
    const n = labelled();
    fill("progress", n + " labelled of " + N);
    $("bar").firstElementChild.style.width = (N ? 100 * n / N : 0) + "%";
    $("done").hidden = !(N && n === N);
  }
  function update(change) {
    const it = items[index];
    const e = Object.assign({label: null, category: null}, store[it.item], change);
    if (e.label === null && !e.category) delete store[it.item]; else store[it.item] = e;
    save();
  }
  function setLabel(value) {
    if (!N) return;
    update({label: value});
    if (index < N - 1) index += 1;
    render();
  }
  function setCategory(name) {
    if (!N) return;
    update({category: entry(items[index]).category === name ? null : name});
    render();
  }
  function move(step) { index = Math.min(N - 1, Math.max(0, index + step)); render(); }
  function nextOpen() {
    for (let s = 1; s <= N; s++) {
      const j = (index + s) % N, e = entry(items[j]);
      if (e.label !== 0 && e.label !== 1) { index = j; break; }
    }
    render();
  }
  function download() {
    const lines = [];
    for (const it of items) {
      const e = entry(it);
      if (e.label === 0 || e.label === 1) lines.push(JSON.stringify({item: it.item, label: e.label, category: e.category || null}));
    }
    const blob = new Blob([lines.map((l) => l + "\n").join("")], {type: "application/x-ndjson"});
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "labels.jsonl";
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 2000);
  }
  $("yes").addEventListener("click", () => setLabel(1));
  $("no").addEventListener("click", () => setLabel(0));
  $("prev").addEventListener("click", () => move(-1));
  $("next").addEventListener("click", () => move(1));
  $("open").addEventListener("click", nextOpen);
  $("clear").addEventListener("click", () => { if (N) { update({label: null, category: null}); render(); } });
  $("download").addEventListener("click", download);
  const byKey = {};
  for (const [name, key] of DATA.categories) if (key) byKey[key] = name;
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const key = ev.key.length === 1 ? ev.key.toLowerCase() : ev.key;
    if (key === "1") setLabel(1);
    else if (key === "0") setLabel(0);
    else if (key === "ArrowRight" || key === "j") move(1);
    else if (key === "ArrowLeft" || key === "k") move(-1);
    else if (key === "Backspace" || key === "Delete" || key === "x") { if (N) { update({label: null, category: null}); render(); } }
    else if (byKey[key]) setCategory(byKey[key]);
    else return;
    ev.preventDefault();
  });
  window.addEventListener("storage", (ev) => {  // the same sheet open in another tab
    if (ev.key === DATA.key) { try { store = JSON.parse(ev.newValue || "{}") || {}; } catch (err) { return; } render(); }
  });
  render();
})();
"""


def render_page(rows: Sequence[dict[str, Any]], title: str = "Label audit") -> str:
    """The labelling page of a sheet's rows, as one HTML document."""
    data = page_data(rows)
    name = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{name}</title>
<style>{STYLE}</style>
</head><body>
<header>
  <h1>{name}</h1>
  <div id="progress">0 labelled of {len(rows)}</div>
  <div id="bar"><div></div></div>
  <button id="download" class="primary" title="Save labels.jsonl for elical label-audit --labels">Download labels</button>
</header>
<main>
  <div id="storage-warning" class="warn" hidden>This browser does not keep the labels (no local storage for this
    page): download them before you close it.</div>
  <div id="done" class="warn" hidden>Every item is labelled. Click <b>Download labels</b> and pass the file to
    <code>elical label-audit RUN --labels labels.jsonl</code>.</div>
  <div id="empty" hidden>This sheet has no items.</div>
  <div id="card" class="card">
    <div class="meta"><span id="position"></span><span id="task"></span><span id="dataset"></span>
      <code id="item-id"></code></div>
    <div id="ask" class="ask"></div>
    <h3>Question</h3>
    <div id="question" class="text"></div>
    <div id="choices-box"><h3>Options</h3><ol id="choices" class="choices" type="A"></ol></div>
    <div id="answer-box"><h3>Answer</h3><div id="answer" class="text reply"></div></div>
    <div id="gold-box"><h3>Gold answers (any one is right)</h3><ul id="gold" class="gold"></ul></div>
    <div id="pair-box" class="pair">
      <div><h3>Reply 1</h3><div id="reply-a" class="text reply"></div></div>
      <div><h3>Reply 2</h3><div id="reply-b" class="text reply"></div></div>
    </div>
    <div class="buttons">
      <button id="yes" class="label yes"><kbd>1</kbd> <span id="yes-word">right</span></button>
      <button id="no" class="label no"><kbd>0</kbd> <span id="no-word">wrong</span></button>
      <button id="clear"><kbd>Backspace</kbd> clear</button>
      <div id="status" class="status"></div>
    </div>
    <h3>Category (optional)</h3>
    <div id="categories" class="cats"></div>
    <nav>
      <button id="prev"><kbd>&larr;</kbd> previous</button>
      <button id="next">next <kbd>&rarr;</kbd></button>
      <button id="open">next unlabelled</button>
    </nav>
  </div>
  <p class="help">Press <kbd>1</kbd> if the answer is right (or the two replies give the same answer),
    <kbd>0</kbd> if not; either moves on. <kbd>&larr;</kbd>/<kbd>&rarr;</kbd> or <kbd>k</kbd>/<kbd>j</kbd> move,
    a category's letter marks what kind of item it is (set it before the label). Labels stay in this browser,
    so you can stop and come back; <b>Download labels</b> saves <code>labels.jsonl</code>.</p>
</main>
<script type="application/json" id="sheet">{_script_json(data)}</script>
<script>{SCRIPT}</script>
</body></html>
"""


def write_page(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "Label audit") -> Path:
    """Write the labelling page of a sheet's rows (atomically); returns its path."""
    path = Path(path)
    with atomic_write(path) as tmp:
        tmp.write_text(render_page(rows, title), encoding="utf-8")
    return path
