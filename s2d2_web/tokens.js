// Token id -> text, for the trace's token strings, from an exported model's tokenizer.json (a byte-level BPE, as the
// bundled models'). Python twin: what s2d2/decoding/forwards.py Recorder.text gets from `tokenizer.decode([id])`.

/** GPT-2's byte <-> printable character table: printable Latin-1 bytes map to themselves, the others to 256 + n. */
function byteDecoder() {
  const keep = [];
  for (let b = 33; b <= 126; b++) keep.push(b);
  for (let b = 161; b <= 172; b++) keep.push(b);
  for (let b = 174; b <= 255; b++) keep.push(b);
  const table = new Map(keep.map((b) => [String.fromCodePoint(b), b]));
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!keep.includes(b)) table.set(String.fromCodePoint(256 + n++), b);
  }
  return table;
}

/** Every token's text, indexed by id (`vocabSize` entries; an id the tokenizer lacks reads "<id>"). Special
 * (added) tokens read as themselves; the others are byte-level decoded, invalid UTF-8 as U+FFFD. */
export function tokenTexts(tokenizer, vocabSize) {
  const model = tokenizer.model;
  if (!model || model.type !== "BPE" || !tokenizer.decoder || tokenizer.decoder.type !== "ByteLevel") {
    throw new RangeError("tokenizer: the page reads byte-level BPE tokenizers only");
  }
  const bytes = byteDecoder();
  const utf8 = new TextDecoder("utf-8", { fatal: false });
  const texts = Array.from({ length: vocabSize }, (_, i) => `<${i}>`);
  for (const [piece, id] of Object.entries(model.vocab)) {
    if (id < 0 || id >= vocabSize) continue;
    const raw = Array.from(piece, (ch) => bytes.get(ch));
    texts[id] = raw.includes(undefined) ? piece : utf8.decode(Uint8Array.from(raw));
  }
  for (const added of tokenizer.added_tokens ?? []) if (added.id >= 0 && added.id < vocabSize) texts[added.id] = added.content;
  return texts;
}
