// The page's fixed elements (index.html) and the messages shown in them.

/** The element with this id; a page without it is a bug of the page, said at once. */
export function $(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the page has no #${id}`);
  return node;
}

/** Shows `message` in the error (or note) paragraph `id`, or hides it when empty. */
export function setError(id, message) {
  const node = $(id);
  node.textContent = message || "";
  node.hidden = !message;
}

export function showBanner(message) {
  $("banner-text").textContent = message;
  $("banner").hidden = false;
}

export function hideBanner() {
  $("banner").hidden = true;
}

/** Said by screen readers (a status region), for changes that move no focus. */
export function announce(message) {
  $("announcer").textContent = message;
}

/** Shows one of the main sections: the welcome, the new conversation form, the chat, or the runs. */
export function showSection(id) {
  for (const section of ["welcome-view", "new-view", "chat-view", "runs-view"]) $(section).hidden = section !== id;
  document.body.dataset.section = id;
}

/** Scrolls the chat to its end (only if the reader is already near it, with `onlyIfNear`). */
export function scrollToEnd(onlyIfNear = false) {
  const scroller = $("turns-scroller");
  const near = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 160;
  if (!onlyIfNear || near) scroller.scrollTop = scroller.scrollHeight;
}

/** A click on the backdrop of a modal dialog (outside its box) closes it. */
export function closeOnBackdropClick(dialog) {
  dialog.addEventListener("click", (event) => {
    if (event.target !== event.currentTarget) return;
    const box = dialog.getBoundingClientRect();
    const inside = event.clientX >= box.left && event.clientX <= box.right && event.clientY >= box.top && event.clientY <= box.bottom;
    if (!inside) dialog.close();
  });
}
