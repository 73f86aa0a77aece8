// Posthorn console: a little progressive enhancement. Every page works without this file;
// with it, copy buttons copy, live sections refresh themselves, the segment builder counts as
// you type, and destructive buttons ask first. No inline handlers: the page CSP forbids them.

document.documentElement.classList.add('js');

const csrfToken = () => document.querySelector('input[name="_csrf"]')?.value ?? '';

// Copy buttons: data-copy names the element whose text is copied.
document.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-copy]');
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const text = source.textContent.trim();
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // Without the clipboard API (a plain-http host), select the text for Ctrl+C.
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
  const label = button.textContent;
  button.textContent = 'Copied';
  button.classList.add('done');
  setTimeout(() => {
    button.textContent = label;
    button.classList.remove('done');
  }, 1500);
});

// Destructive actions ask first.
document.addEventListener('submit', (event) => {
  const form = event.target;
  if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) event.preventDefault();
});

// Live sections: an element with data-live="<ms>" is fetched again from the same URL every
// <ms> and replaced by its new version; once the server stops marking it live, polling stops.
for (const el of document.querySelectorAll('[data-live]')) pollLive(el.id, Number(el.dataset.live) || 2000);

function pollLive(id, interval) {
  const tick = async () => {
    try {
      const res = await fetch(window.location.href, { headers: { Accept: 'text/html' }, credentials: 'same-origin' });
      if (!res.ok) return setTimeout(tick, interval * 2);
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      const fresh = doc.getElementById(id);
      const current = document.getElementById(id);
      if (!fresh || !current) return;
      // Keep open <details> open across refreshes.
      const open = new Set([...current.querySelectorAll('details[open] summary')].map((s) => s.textContent));
      current.replaceWith(document.importNode(fresh, true));
      for (const s of document.getElementById(id).querySelectorAll('details summary')) if (open.has(s.textContent)) s.parentElement.open = true;
      if (fresh.hasAttribute('data-live')) setTimeout(tick, interval);
    } catch {
      setTimeout(tick, interval * 2);
    }
  };
  setTimeout(tick, interval);
}

// The segment builder: add and remove conditions, and show the member count as you type.
for (const form of document.querySelectorAll('form.segment-builder')) {
  const list = form.querySelector('.conditions');
  const template = form.querySelector('#condition-template');
  const output = form.querySelector('#segment-count');
  let n = list ? list.children.length : 0;
  // The property name box only matters for "Property…".
  const showProp = (row) => {
    const prop = row.querySelector('input[name="prop"]');
    if (prop) prop.hidden = row.querySelector('select[name="field"]').value !== 'property';
  };
  for (const row of form.querySelectorAll('.condition')) showProp(row);
  form.addEventListener('change', (event) => {
    const row = event.target.closest('.condition');
    if (row && event.target.name === 'field') showProp(row);
  });
  form.querySelector('.add-condition')?.addEventListener('click', () => {
    n += 1;
    const row = template.content.firstElementChild.cloneNode(true);
    for (const el of row.querySelectorAll('[aria-label]')) el.setAttribute('aria-label', el.getAttribute('aria-label').replace('Condition new', `Condition ${n}`));
    list.append(row);
    showProp(row);
    row.querySelector('select').focus();
  });
  form.addEventListener('click', (event) => {
    const remove = event.target.closest('.remove-condition');
    if (!remove) return;
    remove.closest('li').remove();
    schedule();
  });
  let timer;
  let seq = 0;
  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(count, 250);
  };
  async function count() {
    const mine = ++seq;
    const body = new URLSearchParams(new FormData(form));
    try {
      const res = await fetch(form.dataset.preview, {
        method: 'POST',
        body,
        credentials: 'same-origin',
        headers: { Accept: 'application/json', 'X-CSRF-Token': csrfToken() },
      });
      const data = await res.json();
      if (mine !== seq) return;
      if (data.error) {
        output.textContent = typeof data.error === 'string' ? data.error : data.error.message;
        output.classList.add('error');
      } else {
        output.textContent = `${data.total} contact${data.total === 1 ? '' : 's'} match`;
        output.classList.remove('error');
      }
    } catch {
      // the next change tries again
    }
  }
  form.addEventListener('input', schedule);
  form.addEventListener('change', schedule);
}

// Editors with a preview frame refresh it as you type (the same form, posted to the frame).
for (const button of document.querySelectorAll('button[formtarget][formaction$="/content/preview"]')) {
  const form = button.form;
  let timer;
  form.querySelector('textarea[name="content"]')?.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const { action, target } = form;
      form.action = button.formAction;
      form.target = button.formTarget;
      form.submit();
      form.action = action;
      form.target = target;
    }, 600);
  });
}
