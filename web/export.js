// Export of the current view: a PNG of the heatmap with its title and legend (canvas.toBlob), and a
// JSON document of the weights and the mask. Downloads go through a visible link whose href is an
// object URL (blob:), so the file can be fetched again from the page.

/**
 * Draws `title`, then each canvas below the previous one, on a white background, and encodes it.
 * @param {string} title
 * @param {HTMLCanvasElement[]} canvases  drawn at their backing-store size
 * @returns {Promise<Blob>}
 */
export function composePng(title, canvases) {
  const ratio = globalThis.devicePixelRatio || 1;
  const margin = Math.round(12 * ratio);
  const titleHeight = Math.round(28 * ratio);
  const font = `600 ${Math.round(15 * ratio)}px system-ui, sans-serif`;
  const out = document.createElement('canvas');
  const ctx = out.getContext('2d');
  ctx.font = font;
  const titleWidth = Math.ceil(ctx.measureText(title).width);
  const width = Math.max(titleWidth, ...canvases.map((c) => c.width)) + 2 * margin;
  const height = titleHeight + canvases.reduce((h, c) => h + c.height + margin, 0) + margin;
  out.width = width; // resets the context's state
  out.height = height;
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, width, height);
  ctx.fillStyle = '#1d2330';
  ctx.font = font;
  ctx.textBaseline = 'middle';
  ctx.fillText(title, margin, margin + titleHeight / 2 - margin / 2);
  let y = titleHeight + margin;
  for (const canvas of canvases) {
    ctx.drawImage(canvas, margin, y);
    y += canvas.height + margin;
  }
  return new Promise((resolve, reject) => {
    out.toBlob((blob) => (blob ? resolve(blob) : reject(new Error('The PNG could not be encoded.'))), 'image/png');
  });
}

function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * Points `link` at `blob` (revoking its previous object URL), names the file, shows the link and
 * follows it once so the download starts.
 * @param {Blob} blob
 * @param {string} filename
 * @param {HTMLAnchorElement} link
 */
export function offerDownload(blob, filename, link) {
  if (link.href.startsWith('blob:')) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(blob);
  link.download = filename;
  link.textContent = `${filename} (${sizeText(blob.size)})`;
  link.hidden = false;
  link.click();
}
