// The admin page's schedule panel, on the schedule's JSON API: its entries (added, changed,
// deleted here), the next switches of all of them, and the latest switches it made or
// skipped. Times are shown in the schedule's own time zone, as its weekly times are meant.

import { api } from "./api.js";

const REFRESH_EVERY_MS = 5000;
const form = document.getElementById("schedule-form");
const field = (id) => document.getElementById(id);
const message = field("schedule-message");
let zone = "UTC";

function say(text, isError = false) {
  message.textContent = text;
  message.className = isError ? "message error" : "message muted";
}

// An instant (ISO 8601) as "Fri 27 Nov 20:15:00" in the schedule's zone.
export function when(iso) {
  return new Date(iso).toLocaleString("en-GB", {
    timeZone: zone, weekday: "short", day: "numeric", month: "short",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

// An instant as a datetime-local input's value in the schedule's zone ("2026-11-27T20:15:00").
function localInput(iso) {
  if (!iso) return "";
  return new Date(iso).toLocaleString("sv-SE", { timeZone: zone }).replace(" ", "T");
}

function entryWhen(entry) {
  if (entry.kind === "once") return entry.until ? `${when(entry.at)} – ${when(entry.until)}` : when(entry.at);
  const until = entry.until_time ? `–${entry.until_time}` : "";
  return `${entry.days} ${entry.time_of_day}${until}`;
}

function cell(content) {
  const td = document.createElement("td");
  td.append(content);
  return td;
}

function button(text, onClick) {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = text;
  element.addEventListener("click", onClick);
  return element;
}

function entryRow(entry) {
  const row = document.createElement("tr");
  row.dataset.id = entry.id;
  row.classList.toggle("muted", !entry.enabled);
  const label = entry.name || entry.programme_title || `${entry.kind} entry ${entry.id}`;
  const extras = [entry.then_return ? "then back" : "", entry.enabled ? "" : "disabled"];
  const actions = document.createElement("span");
  actions.append(button("Edit", () => edit(entry)), " ", button("Delete", () => remove(entry)));
  row.append(
    cell([label, ...extras].filter(Boolean).join(" · ")),
    cell(entry.channel_name || `${entry.channel_id} (not in the playlist)`),
    cell(entryWhen(entry)),
    cell(entry.next.length ? when(entry.next[0].start) : "none"),
    cell(actions),
  );
  return row;
}

function listItem(text) {
  const item = document.createElement("li");
  item.textContent = text;
  return item;
}

export async function refreshSchedule() {
  const schedule = await api("/api/admin/schedule");
  zone = schedule.time_zone;
  field("schedule-zone").textContent = `(times in ${zone})`;
  field("schedule-entries").replaceChildren(...schedule.entries.map(entryRow));
  field("schedule-upcoming").replaceChildren(
    ...schedule.upcoming.map((next) =>
      listItem(next.action === "start"
        ? `${when(next.at)} · ${next.channel_name || next.channel_id} (${next.name})`
        : `${when(next.at)} · back to what played before (${next.name} ends)`),
    ),
  );
  field("schedule-runs").replaceChildren(
    ...schedule.runs.map((run) => {
      const late = run.lateness === null ? "" : `, ${run.lateness.toFixed(2)} s late`;
      const detail = run.detail ? `: ${run.detail}` : "";
      return listItem(`${when(run.due_at)} · ${run.name} ${run.action}: ${run.outcome}${late}${detail}`);
    }),
  );
}

function showKind() {
  const once = field("entry-kind").value === "once";
  for (const part of form.querySelectorAll(".once-only")) part.hidden = !once;
  for (const part of form.querySelectorAll(".weekly-only")) part.hidden = once;
}

function formValues() {
  const once = field("entry-kind").value === "once";
  const values = {
    name: field("entry-name").value,
    channel_id: field("entry-channel").value,
    kind: field("entry-kind").value,
    then_return: field("entry-return").checked,
    missed: field("entry-missed").value,
    enabled: field("entry-enabled").checked,
  };
  if (once) {
    values.at = field("entry-at").value || null;
    values.until = field("entry-until").value || null;
  } else {
    values.time_of_day = field("entry-time").value || null;
    values.until_time = field("entry-until-time").value || null;
    values.weekdays = [...field("entry-days").querySelectorAll("input:checked")].map((box) => Number(box.value));
  }
  return values;
}

function edit(entry) {
  field("entry-id").value = entry.id;
  field("entry-name").value = entry.name;
  field("entry-channel").value = entry.channel_id;
  field("entry-kind").value = entry.kind;
  field("entry-time").value = entry.time_of_day || "";
  field("entry-until-time").value = entry.until_time || "";
  field("entry-at").value = localInput(entry.at);
  field("entry-until").value = localInput(entry.until);
  for (const box of field("entry-days").querySelectorAll("input")) {
    box.checked = entry.weekdays.includes(Number(box.value));
  }
  field("entry-return").checked = entry.then_return;
  field("entry-missed").value = entry.missed;
  field("entry-enabled").checked = entry.enabled;
  field("entry-save").textContent = "Save entry";
  field("entry-cancel").hidden = false;
  showKind();
}

function formReset() {
  form.reset();
  field("entry-id").value = "";
  field("entry-save").textContent = "Add entry";
  field("entry-cancel").hidden = true;
  showKind();
}

async function remove(entry) {
  try {
    await api(`/api/admin/schedule/${entry.id}`, { method: "DELETE" });
    say("Entry deleted.");
    await refreshSchedule();
  } catch (error) {
    say(error.message, true);
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const id = field("entry-id").value;
  try {
    await api(id ? `/api/admin/schedule/${id}` : "/api/admin/schedule", {
      method: id ? "PATCH" : "POST",
      body: JSON.stringify(formValues()),
    });
    say(id ? "Entry saved." : "Entry added.");
    formReset();
    await refreshSchedule();
  } catch (error) {
    say(error.message, true);
  }
});
field("entry-kind").addEventListener("change", showKind);
field("entry-cancel").addEventListener("click", formReset);

async function loadChannelIds() {
  const channels = await api("/api/admin/channels");
  field("channel-ids").replaceChildren(
    ...channels.slice(0, 500).map((channel) => new Option(channel.name, channel.id)),
  );
}

async function poll() {
  try {
    await refreshSchedule();
  } catch (error) {
    say(`The schedule cannot be read: ${error.message}`, true);
  }
  setTimeout(poll, REFRESH_EVERY_MS);
}

loadChannelIds().catch((error) => say(error.message, true));
poll();
