/**
 * The legal and historical notices every package carries: the licence (svc is Apache-2.0; the Deno
 * runtime inside each program is MIT), Debian's machine-readable copyright file and changelog, the rpm
 * changelog, and the lintian overrides for what a prebuilt upstream runtime cannot change.
 *
 * @module
 */
import { PACKAGE_META, type PackageName } from "./targets.ts";

/** What a notice needs to know about its package. */
export interface NoticeSubject {
  name: PackageName;
  version: string;
  release: string;
  /** Build time, seconds since the epoch. */
  mtime: number;
}

/**
 * SPDX expression of every package: svc's own code, plus the MIT-licensed Deno runtime that each program
 * carries (and that the agent repository's packages carry in turn).
 */
export const SPDX_LICENSE = `${PACKAGE_META.license} AND MIT`;

/** The Expat/MIT grant of the Deno runtime (github.com/denoland/deno LICENSE.md). */
const DENO_MIT = `Permission is hereby granted, free of charge, to any person obtaining a copy of this
software and associated documentation files (the "Software"), to deal in the Software
without restriction, including without limitation the rights to use, copy, modify, merge,
publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons
to whom the Software is furnished to do so, subject to the following conditions:
.
The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.
.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR
PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE
FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
DEALINGS IN THE SOFTWARE.`;

const APACHE_GRANT = `Licensed under the Apache License, Version 2.0 (the "License"); you may not use
this software except in compliance with the License. You may obtain a copy of the License at
.
    http://www.apache.org/licenses/LICENSE-2.0
.
Unless required by applicable law or agreed to in writing, software distributed under the
License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND,
either express or implied. See the License for the specific language governing permissions
and limitations under the License.
.
On Debian systems, the complete text of the Apache License, Version 2.0 can be found in
"/usr/share/common-licenses/Apache-2.0".`;

function year(mtime: number): number {
  return new Date(mtime * 1000).getUTCFullYear();
}

/** `/usr/share/doc/<name>/copyright` in Debian's machine-readable format (DEP-5). */
export function debCopyright(subject: NoticeSubject): string {
  const indent = (text: string) => text.split("\n").map((l) => ` ${l}`).join("\n");
  const stanzas = [
    [
      "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/",
      "Upstream-Name: svc",
      `Upstream-Contact: ${PACKAGE_META.maintainer}`,
    ].join("\n"),
    `Files: *\nCopyright: ${
      year(subject.mtime)
    } ${PACKAGE_META.copyrightHolder}\nLicense: ${PACKAGE_META.license}`,
  ];
  if (subject.name === "svc-agent-repo") {
    stanzas.push(
      `Files: usr/share/svc/agent-repo/*\nCopyright: ${
        year(subject.mtime)
      } ${PACKAGE_META.copyrightHolder}\n` +
        ` the Deno authors\nLicense: ${PACKAGE_META.license} and Expat\n` +
        `Comment: svc-agent packages: svc (${PACKAGE_META.license}) with the Deno runtime (Expat) inside.`,
    );
  } else {
    stanzas.push(`Files: usr/lib/${subject.name}/lib/deno\nCopyright: the Deno authors\nLicense: Expat`);
  }
  stanzas.push(`License: ${PACKAGE_META.license}\n${indent(APACHE_GRANT)}`);
  stanzas.push(`License: Expat\n${indent(DENO_MIT)}`);
  return stanzas.join("\n\n") + "\n";
}

/** `changelog.Debian` (gzipped by the deb writer). */
export function debChangelog(subject: NoticeSubject): string {
  const date = new Date(subject.mtime * 1000).toUTCString().replace("GMT", "+0000");
  return `${subject.name} (${subject.version}-${subject.release}) unstable; urgency=medium\n\n` +
    `  * Release ${subject.version}.\n\n -- ${PACKAGE_META.maintainer}  ${date}\n`;
}

/** The spec's `%changelog` entry. */
export function rpmChangelog(subject: NoticeSubject): string {
  const d = new Date(subject.mtime * 1000);
  const day = d.toUTCString().slice(0, 3);
  const month = d.toUTCString().slice(8, 11);
  const date = `${day} ${month} ${String(d.getUTCDate()).padStart(2, "0")} ${d.getUTCFullYear()}`;
  return `* ${date} ${PACKAGE_META.maintainer} - ${subject.version}-${subject.release}\n` +
    `- Release ${subject.version}.\n`;
}

/**
 * Lintian overrides for the upstream Deno runtime, which the build ships as published: it links a copy
 * of lcms2 statically (embedded-library) and is not under our control to rebuild.
 */
export function lintianOverrides(subject: NoticeSubject): string | undefined {
  if (subject.name === "svc-agent-repo") return undefined;
  return `# The Deno runtime is shipped as its project publishes it; it carries its own lcms2.\n` +
    `${subject.name}: embedded-library lcms2 [usr/lib/${subject.name}/lib/deno]\n`;
}

/** Wraps a paragraph at `width` columns. */
export function wrap(text: string, width = 76): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/)) {
    if (line && line.length + word.length + 1 > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}
