/** DOM helpers of the sidebar: every string from a run or a server is set as text, never HTML. */

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls?: string,
  text?: string,
  attrs: Record<string, string> = {}
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  for (const [k, v] of Object.entries(attrs)) {
    node.setAttribute(k, v);
  }
  return node;
}

export function button(label: string, action: string, title: string, onClick: () => void): HTMLButtonElement {
  const b = el('button', `jp-Button primenb-action primenb-act-${action}`, label, { title, 'data-action': action });
  b.addEventListener('click', event => {
    event.stopPropagation();
    onClick();
  });
  return b;
}
