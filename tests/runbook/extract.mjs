// Reads docs/runbook.md into the commands it tells on-call to run, so that a test can run
// them (tests/runbook/run.mjs): every ```sh block, whole, and every inline code span that
// starts with a command word (rx, kubectl, curl, helm, cmctl, openssl, for). Each command
// keeps the "## " section it is in. Markdown's rules that matter here: a code span may wrap
// across lines (the line break is a space), a fenced block ends at its closing fence, and one
// inside a list item is indented like the item.
//
// A block is then cut into statements (splitStatements): one per line, a line ending in "\"
// continued by the next, a line starting with "|" continuing the one before, and a for/while/if
// running to its done/fi.
import fs from 'node:fs';

const kCommandWords = /^(rx|kubectl|curl|helm|cmctl|openssl|for)\b/;

export function extractCommands(markdown) {
  const commands = [];
  let section = '';
  let paragraph = [];
  const flush = () => {
    const text = paragraph.join(' ');
    paragraph = [];
    // Backtick runs of the same length delimit a span (``a`b`` holds "a`b").
    const span = /(`+)([\s\S]*?[^`])\1(?!`)/g;
    for (let m; (m = span.exec(text)) !== null;) {
      let code = m[2].replace(/\s+/g, ' ').trim();
      code = code.replace(/\\\|/g, '|');  // a table cell escapes the pipe
      if (kCommandWords.test(code)) commands.push({ section, kind: 'inline', text: code });
    }
  };
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const heading = /^##\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      section = heading[1].trim();
      continue;
    }
    const fence = /^( *)```(\w*)\s*$/.exec(line);
    if (fence) {
      flush();
      const indent = fence[1].length;  // a block inside a list item is indented with it
      const body = [];
      for (i++; i < lines.length && !/^ *```\s*$/.test(lines[i]); i++) body.push(lines[i].slice(indent));
      if (fence[2] === 'sh') commands.push({ section, kind: 'block', text: body.join('\n') });
      continue;
    }
    if (line.trim() === '') flush();
    else paragraph.push(line);
  }
  flush();
  return commands;
}

export function splitStatements(block) {
  const statements = [];
  let current = '';
  let depth = 0;
  for (const line of block.split('\n')) {
    if (line.trim() === '' && depth === 0 && current === '') continue;
    const continues = /\\\s*$/.test(line);
    if (current !== '' && depth === 0 && !/^\s*\|/.test(line) && !current.endsWith('\\')) {
      statements.push(current);
      current = '';
    }
    current = current === '' ? line : `${current}\n${line}`;
    if (/^\s*(for|while|until|if)\b/.test(line)) depth++;
    if (/^\s*(done|fi)\b/.test(line)) depth--;
    if (continues) continue;
  }
  if (current !== '') statements.push(current);
  return statements;
}

if (process.argv[1] && process.argv[1].endsWith('extract.mjs')) {
  const file = process.argv[2] ?? 'docs/runbook.md';
  for (const c of extractCommands(fs.readFileSync(file, 'utf8'))) {
    console.log(`[${c.section}] ${c.kind}: ${c.text}`);
  }
}
