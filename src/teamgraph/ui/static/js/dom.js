// A tiny element builder. Text always goes in as text nodes, never as HTML, so nothing from
// a run or a user can become markup.

export function h(tag, attrs = {}, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function s(tag, attrs = {}, ...children) {
  return build(document.createElementNS("http://www.w3.org/2000/svg", tag), attrs, children);
}

function build(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "class") el.setAttribute("class", value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  return append(el, children);
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

/** ``text`` with each 32-character run id (as the server's messages name runs) in the 12-character
 * short form the CLI shows and accepts. */
export const shortIds = (text) => String(text).replace(/\b([0-9a-f]{12})[0-9a-f]{20}\b/g, "$1");
export const fmtTokens = (n) => (n >= 10000 ? `${(n / 1000).toFixed(1)}k` : String(n));
export const fmtUsd = (x) => `$${(x || 0).toFixed(x >= 1 ? 2 : 4)}`;
export const fmtSeconds = (x) => (x === null || x === undefined ? "" : x < 10 ? `${x.toFixed(1)}s` : `${Math.round(x)}s`);
