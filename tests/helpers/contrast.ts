/**
 * WCAG contrast of what a person sees, measured from computed colours in the page (light and shadow trees):
 * text against what is behind it (4.5:1 for normal text), and graphics — a chart's lines, a progress bar's
 * segments — against their background (3:1 for non-text contrast). Colours with transparency are composited
 * over the backgrounds behind them, walking up the composed tree.
 */
import type { Page } from "puppeteer-core";

// deno-lint-ignore no-explicit-any
declare function getComputedStyle(el: any): any;
// deno-lint-ignore no-explicit-any
type El = any;

/**
 * The colour arithmetic both measures use, run in the page: parsing a computed colour, the composed parent,
 * the opaque background behind an element (layers with transparency composited over white), and the WCAG
 * ratio of a colour over a background.
 */
function colourMath() {
  const parse = (c: string): number[] | undefined => {
    const m = /rgba?\(([^)]*)\)/.exec(c);
    if (!m) return undefined;
    const p = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const up = (el: El) => el.assignedSlot ?? el.parentElement ?? el.getRootNode().host ?? null;
  const background = (el: El): number[] => {
    const layers: number[][] = [];
    for (let e = el; e; e = up(e)) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) {
        layers.push(c);
        if (c[3] >= 1) break;
      }
    }
    let out = [255, 255, 255];
    for (const c of layers.reverse()) out = out.map((v, i) => c[i] * c[3] + v * (1 - c[3]));
    return out;
  };
  const luminance = (rgb: number[]) => {
    const f = (v: number) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]);
  };
  /** `colour` (with its alpha) composited over `bg`, against `bg`, rounded to hundredths. */
  const ratio = (colour: number[], bg: number[]): number => {
    const fg = [0, 1, 2].map((i) => colour[i] * colour[3] + bg[i] * (1 - colour[3]));
    const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
    return Math.round(((hi + 0.05) / (lo + 0.05)) * 100) / 100;
  };
  return { parse, up, background, ratio };
}

/** What {@link installColourMath} puts at `globalThis.__svcColourMath` in the page. */
type ColourMath = ReturnType<typeof colourMath>;

/**
 * Installs {@link colourMath} in the page as it is now, through DevTools so the console's CSP stays intact (a
 * navigation drops it, so each measure installs it again).
 */
async function installColourMath(page: Page): Promise<void> {
  await page.evaluate(`globalThis.__svcColourMath = (${colourMath})();`);
}

/**
 * Every visible piece of text under `selector` (light and shadow trees) with its WCAG contrast ratio: the
 * text colour composited over the backgrounds behind it, walking up the composed tree.
 */
export async function contrastOf(
  page: Page,
  selector: string,
): Promise<Array<{ text: string; ratio: number }>> {
  await installColourMath(page);
  return await page.$eval(selector, (root: El) => {
    const { parse, up, background, ratio } = (globalThis as unknown as { __svcColourMath: ColourMath })
      .__svcColourMath;
    const out: Array<{ text: string; ratio: number }> = [];
    const visit = (node: El) => {
      for (const child of node.childNodes) {
        if (child.nodeType === 3 && child.textContent.trim()) {
          const parent = child.parentElement ?? node.host;
          if (!parent || ["STYLE", "SCRIPT"].includes(parent.tagName)) continue;
          let styled = parent;
          if (parent.shadowRoot) {
            if (!child.assignedSlot) continue;
            styled = child.assignedSlot;
          }
          // A slot's fallback text shows only while nothing is assigned to the slot.
          if (parent.tagName === "SLOT" && parent.assignedNodes().length > 0) continue;
          let box = parent;
          while (box && box.tagName === "SLOT") box = up(box);
          if (!box?.checkVisibility({ visibilityProperty: true, opacityProperty: true })) continue;
          const color = parse(getComputedStyle(styled).color);
          if (!color) {
            out.push({ text: child.textContent.trim().slice(0, 40), ratio: NaN });
            continue;
          }
          out.push({
            text: child.textContent.trim().replace(/\s+/g, " ").slice(0, 40),
            ratio: ratio(color, background(styled)),
          });
        } else if (child.nodeType === 1) {
          visit(child);
          if (child.shadowRoot) visit(child.shadowRoot);
        }
      }
    };
    visit(root);
    if (root.shadowRoot) visit(root.shadowRoot);
    return out;
  });
}

/**
 * The contrast of every visible graphic matching `selector` against the background behind it: an SVG shape by
 * its stroke (or its fill when it has no stroke), an HTML element by its background colour. `label` names
 * each (its `data-state`, class or tag).
 */
export async function graphicContrastOf(
  page: Page,
  selector: string,
): Promise<Array<{ label: string; colour: string; ratio: number }>> {
  await installColourMath(page);
  return await page.$$eval(selector, (els: El[]) => {
    const { parse, up, background, ratio } = (globalThis as unknown as { __svcColourMath: ColourMath })
      .__svcColourMath;
    return els.filter((el) => el.checkVisibility?.({ visibilityProperty: true }) ?? true).map((el) => {
      const style = getComputedStyle(el);
      const svgShape = el.namespaceURI === "http://www.w3.org/2000/svg";
      const raw = svgShape
        ? (style.stroke && style.stroke !== "none" ? style.stroke : style.fill)
        : style.backgroundColor;
      const colour = parse(raw);
      const label = el.dataset?.state ?? el.getAttribute("class") ?? el.tagName;
      if (!colour) return { label, colour: raw, ratio: NaN };
      return { label, colour: raw, ratio: ratio(colour, background(up(el))) };
    });
  });
}
