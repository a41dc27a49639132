// Model output as a small, safe subset of Markdown, built as DOM nodes.
//
// Nothing of the text is ever parsed as HTML: every piece becomes a text node (the browser
// escapes it), inside a fixed set of elements: p, h3–h5, ul/ol/li, blockquote, pre/code,
// strong, em, code, and a (http, https and mailto links only, opened without a referrer).
// `<script>`, `<img onerror=…>` and the like stay visible text.

const FENCE = /^```/;
const HEADING = /^(#{1,3})\s+(.*)$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*\d{1,9}[.)]\s+(.*)$/;
const QUOTE = /^>\s?(.*)$/;
const SAFE_LINK = /^(https?:\/\/|mailto:)/i;
// One inline token at a time: `code`, **strong**, *em* / _em_, [text](url).
const INLINE = /`([^`\n]+)`|\*\*([^*\n]+)\*\*|\*([^*\n]+)\*|(?<![\w])_([^_\n]+)_(?![\w])|\[([^\]\n]+)\]\(([^)\s]+)\)/;

function node(tag, children) {
  const element = document.createElement(tag);
  element.append(...children);
  return element;
}

/** Inline pieces of one line of text: text nodes and a few formatting elements. */
export function inline(text) {
  const out = [];
  let rest = text;
  // Bounded: each pass consumes at least one character of `rest`.
  while (rest) {
    const match = INLINE.exec(rest);
    if (!match) {
      out.push(document.createTextNode(rest));
      break;
    }
    if (match.index) out.push(document.createTextNode(rest.slice(0, match.index)));
    const [whole, code, strong, em, em2, label, href] = match;
    if (code !== undefined) out.push(node("code", [code]));
    else if (strong !== undefined) out.push(node("strong", inline(strong)));
    else if (em !== undefined || em2 !== undefined) out.push(node("em", inline(em ?? em2)));
    else if (SAFE_LINK.test(href)) {
      const link = node("a", inline(label));
      link.href = href;
      link.rel = "noopener noreferrer nofollow";
      link.target = "_blank";
      out.push(link);
    } else out.push(document.createTextNode(whole));
    rest = rest.slice(match.index + whole.length);
  }
  return out;
}

function paragraph(lines) {
  const children = [];
  lines.forEach((line, i) => {
    if (i) children.push(document.createElement("br"));
    children.push(...inline(line));
  });
  return node("p", children);
}

function list(lines, pattern, tag) {
  return node(tag, lines.map((line) => node("li", inline(line.match(pattern)[1]))));
}

/** Takes lines from `lines` at `i` while `test` holds; returns them and the next index. */
function run(lines, i, test) {
  const taken = [];
  while (i < lines.length && test(lines[i])) taken.push(lines[i++]);
  return [taken, i];
}

/** A fragment of block elements for `text` (any string; never interpreted as HTML). */
export function renderMarkdown(text) {
  const lines = String(text).replaceAll("\r\n", "\n").split("\n");
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i += 1;
    } else if (FENCE.test(line)) {
      const [body, next] = run(lines, i + 1, (l) => !FENCE.test(l));
      const code = node("code", [body.join("\n")]);
      const lang = line.slice(3).trim();
      if (/^[\w+-]{1,20}$/.test(lang)) code.dataset.lang = lang;
      blocks.push(node("pre", [code]));
      i = next + 1;
    } else if (HEADING.test(line)) {
      const [, hashes, title] = line.match(HEADING);
      blocks.push(node(`h${hashes.length + 2}`, inline(title)));
      i += 1;
    } else if (BULLET.test(line)) {
      const [items, next] = run(lines, i, (l) => BULLET.test(l));
      blocks.push(list(items, BULLET, "ul"));
      i = next;
    } else if (NUMBERED.test(line)) {
      const [items, next] = run(lines, i, (l) => NUMBERED.test(l));
      blocks.push(list(items, NUMBERED, "ol"));
      i = next;
    } else if (QUOTE.test(line)) {
      const [quoted, next] = run(lines, i, (l) => QUOTE.test(l));
      blocks.push(node("blockquote", [paragraph(quoted.map((l) => l.match(QUOTE)[1]))]));
      i = next;
    } else {
      const plain = (l) => l.trim() && ![FENCE, HEADING, BULLET, NUMBERED, QUOTE].some((p) => p.test(l));
      const [para, next] = run(lines, i, plain);
      blocks.push(paragraph(para));
      i = next;
    }
  }
  const fragment = document.createDocumentFragment();
  fragment.append(...blocks);
  return fragment;
}
