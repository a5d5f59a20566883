// Markdown → DOM nodes, safely: the source is never parsed as HTML. Every piece of text becomes
// a text node, so `<script>`, `<img onerror=…>` and the like show as the characters they are;
// links keep only http(s) and mailto targets (a `javascript:` link stays plain text).

import { h } from "./dom.js";

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

const INLINE = [
  { re: /`([^`]+)`/, make: (m) => h("code", {}, m[1]) }, // spans may cross soft line breaks
  { re: /\*\*([^*]+?)\*\*/, make: (m) => h("strong", {}, inline(m[1])) },
  { re: /__([^_]+?)__/, make: (m) => h("strong", {}, inline(m[1])) },
  { re: /\[([^\]\n]+)\]\(([^)\s]+)\)/, make: link },
  { re: /(^|[^\w*])\*([^*\n]+?)\*(?!\w)/, lead: 1, make: (m) => h("em", {}, inline(m[2])) },
  { re: /(^|[^\w])_([^_\n]+?)_(?!\w)/, lead: 1, make: (m) => h("em", {}, inline(m[2])) },
];

function link(m) {
  const [, text, url] = m;
  if (!SAFE_URL.test(url)) return document.createTextNode(m[0]);
  return h("a", { href: url, target: "_blank", rel: "noopener noreferrer nofollow" }, inline(text));
}

/** Inline markdown of one line or paragraph → nodes. */
export function inline(text) {
  const out = [];
  let rest = text;
  while (rest) {
    let best = null;
    for (const rule of INLINE) {
      const m = rule.re.exec(rest);
      if (!m) continue;
      const start = m.index + (rule.lead ? m[rule.lead].length : 0);
      if (!best || start < best.start) best = { rule, m, start };
    }
    if (!best) {
      out.push(document.createTextNode(rest));
      break;
    }
    if (best.start > 0) out.push(document.createTextNode(rest.slice(0, best.start)));
    out.push(best.rule.make(best.m));
    rest = rest.slice(best.m.index + best.m[0].length);
  }
  return out;
}

const isFence = (line) => /^\s*```/.test(line);
const isHr = (line) => /^\s*([-*_])(\s*\1){2,}\s*$/.test(line);
const heading = (line) => /^(#{1,6})\s+(.*)$/.exec(line);
const bullet = (line) => /^\s*[-*+]\s+(.*)$/.exec(line);
const numbered = (line) => /^\s*\d+[.)]\s+(.*)$/.exec(line);
const quote = (line) => /^\s*>\s?(.*)$/.exec(line);
const tableRow = (line) => /^\s*\|.*\|\s*$/.test(line);
const cells = (line) => line.trim().replace(/^\||\|$/g, "").split("|").map((c) => c.trim());

function startsBlock(line) {
  return isFence(line) || isHr(line) || heading(line) || bullet(line) || numbered(line) || quote(line) || tableRow(line);
}

/** A whole markdown document → a DocumentFragment. */
export function renderMarkdown(source) {
  const frag = document.createDocumentFragment();
  const lines = String(source || "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i += 1;
    } else if (isFence(line)) {
      const lang = line.trim().slice(3).trim();
      const body = [];
      i += 1;
      while (i < lines.length && !isFence(lines[i])) body.push(lines[i++]);
      i += 1; // the closing fence
      frag.append(h("pre", {}, h("code", { "data-lang": lang || null }, body.join("\n"))));
    } else if (isHr(line)) {
      frag.append(h("hr"));
      i += 1;
    } else if (heading(line)) {
      const m = heading(line);
      frag.append(h(`h${m[1].length}`, {}, inline(m[2])));
      i += 1;
    } else if (tableRow(line) && i + 1 < lines.length && /^\s*\|[\s:|-]+\|\s*$/.test(lines[i + 1])) {
      const head = cells(line);
      i += 2;
      const rows = [];
      while (i < lines.length && tableRow(lines[i])) rows.push(cells(lines[i++]));
      frag.append(
        h("table", {},
          h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, inline(c))))),
          h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, inline(c))))))),
      );
    } else if (bullet(line) || numbered(line)) {
      const ordered = !bullet(line);
      const match = ordered ? numbered : bullet;
      const items = [];
      while (i < lines.length && match(lines[i])) items.push(match(lines[i++])[1]);
      frag.append(h(ordered ? "ol" : "ul", {}, items.map((t) => h("li", {}, inline(t)))));
    } else if (quote(line)) {
      const body = [];
      while (i < lines.length && quote(lines[i])) body.push(quote(lines[i++])[1]);
      frag.append(h("blockquote", {}, renderMarkdown(body.join("\n"))));
    } else {
      const para = [];
      while (i < lines.length && lines[i].trim() && !(para.length && startsBlock(lines[i]))) {
        para.push(lines[i++].trim());
      }
      frag.append(h("p", {}, inline(para.join("\n"))));
    }
  }
  return frag;
}
