// Background agent tasks of the session, from its `task` notices: one row each, with progress.

import { el } from "./render.js";

const FINISHED = new Set(["completed", "failed", "canceled"]);

export class TaskList {
  /** `container`: the (hidden until needed) section the rows go in. */
  constructor(container) {
    this.container = container;
    this.list = container.querySelector("ul");
    this.list.replaceChildren();
    this.container.hidden = true;
    this.rows = new Map();
  }

  row(id, agent) {
    let row = this.rows.get(id);
    if (!row) {
      const bar = el("progress", { max: "1", "aria-label": `Progress of ${agent}` });
      const status = el("span", { class: "task-status" });
      const note = el("span", { class: "label task-note" });
      const node = el("li", { class: "task", "data-task-id": id },
        el("span", { class: "task-agent", text: agent }), status, bar, note);
      row = { node, bar, status, note };
      this.rows.set(id, row);
      this.list.prepend(node);
      this.container.hidden = false;
    }
    return row;
  }

  /** A `task` event: `{id, agent, status, progress: {fraction, note}?, error?}`. */
  show(task) {
    if (!task || typeof task.id !== "string") return;
    const row = this.row(task.id, task.agent || "agent");
    row.node.dataset.status = task.status;
    row.status.textContent = task.status;
    const fraction = task.progress && typeof task.progress.fraction === "number" ? task.progress.fraction : null;
    if (FINISHED.has(task.status)) row.bar.value = task.status === "completed" ? 1 : row.bar.value || 0;
    else if (fraction !== null) row.bar.value = Math.min(1, Math.max(0, fraction));
    else row.bar.removeAttribute("value"); // indeterminate
    const note = task.error ? task.error.message : task.progress && task.progress.note;
    row.note.textContent = typeof note === "string" ? note : "";
  }
}
