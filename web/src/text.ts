/**
 * Text from outside (a file name) as a page may print it. A name can hold
 * characters that are not shown but change what is: U+202E RIGHT-TO-LEFT
 * OVERRIDE makes `invoice\u202Efdp.exe` read as "invoiceexe.pdf". Every
 * format character (Unicode category Cf: the bidi controls, zero-width
 * spaces, soft hyphens, tags), control character (Cc), line or paragraph
 * separator (Zl, Zp) and lone surrogate (Cs) is shown escaped, `\u202E`
 * (`\u{E0041}` beyond U+FFFF), so that what is shown is what the name holds.
 * ZERO WIDTH JOINER and NON-JOINER (U+200D, U+200C) are kept: emoji
 * sequences and several scripts (Persian, the Indic ones) are written with
 * them, and they reorder nothing.
 */
const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;
const KEPT = new Set(["\u200c", "\u200d"]);

export function printable(text: string): string {
  return text.replace(HIDDEN, (c) => {
    if (KEPT.has(c)) return c;
    const hex = c.codePointAt(0)!.toString(16).toUpperCase();
    return hex.length > 4 ? `\\u{${hex}}` : `\\u${hex.padStart(4, "0")}`;
  });
}
