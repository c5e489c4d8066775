/**
 * One spelling per API: an upload is kept under the API, not under how its
 * base URL was typed, so that `http://127.0.0.1:3000`, `…:3000/`,
 * `…:3000//` and `HTTP://…:3000` are one API (issue 29: each spelling gave
 * the same file another upload). The Go client's `client.NormalizeBaseURL`
 * follows the same rules; both are tested against one table,
 * pkg/api/testdata/base-urls.json.
 */

/**
 * `scheme://authority/path` with nothing a base URL cannot hold: user info
 * (`@`), a query or a fragment, or a backslash (which the WHATWG parser
 * reads as a slash and Go's does not). Checked on the text as given,
 * before the WHATWG parser quietly repairs `http:/host` or `http:///host`.
 */
const SHAPE = /^https?:\/\/[^/?#@\\]+(?:\/[^?#\\]*)?$/i;

/** Whitespace or a control character, which the WHATWG parser drops and Go's refuses. */
const hasBlank = (s: string) => [...s].some((c) => c <= " " || c === "\x7f");

/**
 * The API's base URL in its one spelling: absolute http(s) only; scheme and
 * host lower-cased; the scheme's default port dropped; runs of slashes in
 * the path collapsed; trailing slashes removed (an empty path stays empty).
 * A different host name for the same server (`localhost`, `127.0.0.1`) is
 * another API: nothing here can know they are one server. Throws a
 * TypeError for anything else.
 */
export function normalizeBaseUrl(raw: string): string {
  let u: URL | undefined;
  if (SHAPE.test(raw) && !hasBlank(raw)) {
    try {
      u = new URL(raw);
    } catch {
      // Refused below.
    }
  }
  if (!u || u.hostname === "") {
    throw new TypeError(`${JSON.stringify(raw)} is not an API base URL: want an absolute http(s) URL without a query, such as https://api.example.com or http://127.0.0.1:3000`);
  }
  // The parser lower-cases the scheme and the host and drops a default port.
  const path = u.pathname.replace(/\/{2,}/g, "/").replace(/\/+$/, "");
  return `${u.protocol}//${u.host}${path}`;
}

/** The normalised form of a stored base URL, or undefined where it is none (a record of an older version may hold anything). */
export function normalizedOrUndefined(raw: string): string | undefined {
  try {
    return normalizeBaseUrl(raw);
  } catch {
    return undefined;
  }
}
