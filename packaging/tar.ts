/**
 * A small POSIX tar (ustar + pax extended headers) writer for the package formats that are written
 * directly (Alpine's apk, Arch's pkg.tar): both need control over details that GNU tar does not offer —
 * apk wants a per-file `APK-TOOLS.checksum.SHA1` pax record and segments without the end-of-archive
 * blocks, Arch wants dot-files first and root ownership throughout.
 *
 * @module
 */

import { concatBytes } from "../shared/bytes.ts";

/** One member of an archive. Paths are relative (`usr/bin/svc-agent`), directories without a slash. */
export interface TarEntry {
  path: string;
  type: "file" | "dir" | "symlink";
  mode: number;
  data?: Uint8Array<ArrayBuffer>;
  linkname?: string;
  /** Extra pax records written before the member (e.g. apk's checksum). */
  pax?: Record<string, string>;
}

/** Options for {@link writeTar}. */
export interface TarOptions {
  /** Modification time of every member, seconds since the epoch (reproducible builds). */
  mtime: number;
  /** Append the two zero blocks that end an archive (apk's control segment omits them). */
  trailer?: boolean;
}

const BLOCK = 512;
const encoder = new TextEncoder();

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, "0") + "\0";
}

function header(
  name: string,
  opts: { size: number; mode: number; typeflag: string; linkname?: string; mtime: number },
): Uint8Array {
  const block = new Uint8Array(BLOCK);
  const put = (offset: number, width: number, text: string) => {
    const bytes = encoder.encode(text);
    if (bytes.length > width) throw new Error(`tar: field too long for ${name}`);
    block.set(bytes, offset);
  };
  let prefix = "";
  let base = name;
  if (encoder.encode(name).length > 100) {
    const cut = name.lastIndexOf("/", 154);
    if (cut > 0 && encoder.encode(name.slice(cut + 1)).length <= 100) {
      prefix = name.slice(0, cut);
      base = name.slice(cut + 1);
    } else base = name.slice(0, 100); // the pax "path" record carries the real name
  }
  put(0, 100, base);
  put(100, 8, octal(opts.mode & 0o7777, 8));
  put(108, 8, octal(0, 8));
  put(116, 8, octal(0, 8));
  put(124, 12, octal(opts.size, 12));
  put(136, 12, octal(opts.mtime, 12));
  put(148, 8, "        ");
  put(156, 1, opts.typeflag);
  if (opts.linkname) put(157, 100, opts.linkname);
  put(257, 6, "ustar\0");
  put(263, 2, "00");
  put(265, 32, "root");
  put(297, 32, "root");
  put(345, 155, prefix);
  let sum = 0;
  for (const b of block) sum += b;
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return block;
}

function paxRecords(records: Record<string, string>): Uint8Array {
  let text = "";
  for (const [key, value] of Object.entries(records)) {
    const body = ` ${key}=${value}\n`;
    const bodyLength = encoder.encode(body).length;
    let len = bodyLength + 1;
    while (String(len).length + bodyLength !== len) len = String(len).length + bodyLength;
    text += `${len}${body}`;
  }
  return encoder.encode(text);
}

function padded(data: Uint8Array): Uint8Array[] {
  const rest = data.length % BLOCK;
  return rest === 0 ? [data] : [data, new Uint8Array(BLOCK - rest)];
}

/** Writes `entries` in order as one tar archive. */
export function writeTar(entries: TarEntry[], options: TarOptions): Uint8Array<ArrayBuffer> {
  const parts: Uint8Array[] = [];
  for (const entry of entries) {
    const name = entry.type === "dir" ? `${entry.path}/` : entry.path;
    const pax: Record<string, string> = { ...entry.pax };
    if (encoder.encode(name).length > 100 && !/^.{1,154}\/[^/]{1,100}$/.test(name)) pax.path = name;
    if (entry.linkname && encoder.encode(entry.linkname).length > 100) pax.linkpath = entry.linkname;
    if (Object.keys(pax).length > 0) {
      const body = paxRecords(pax);
      const paxName = `PaxHeaders/${name.replace(/\/$/, "").split("/").pop()}`.slice(0, 100);
      parts.push(header(paxName, { size: body.length, mode: 0o644, typeflag: "x", mtime: options.mtime }));
      parts.push(...padded(body));
    }
    const data = entry.type === "file" ? entry.data ?? new Uint8Array() : new Uint8Array();
    const typeflag = entry.type === "file" ? "0" : entry.type === "dir" ? "5" : "2";
    parts.push(header(name, {
      size: data.length,
      mode: entry.mode,
      typeflag,
      linkname: entry.linkname,
      mtime: options.mtime,
    }));
    if (data.length > 0) parts.push(...padded(data));
  }
  if (options.trailer !== false) parts.push(new Uint8Array(BLOCK * 2));
  return concatBytes(parts);
}
