// The schedule panel's pick from the guide: a channel's programmes that have not ended, each
// upcoming one with "Play when it starts", which makes a one-off entry from its start to its
// stop, then back to what played before. A programme is named by its channel and start (and
// the guide it was read from), as the API wants: the guide's rows change with each refresh.

import { api } from "./api.js";
import { refreshSchedule, when } from "./schedule.js";

const list = document.getElementById("pick-programmes");
const message = document.getElementById("pick-message");

function say(text, isError = false) {
  message.textContent = text;
  message.className = isError ? "message error" : "message muted";
}

function programmeItem(channelId, guideVersion, programme) {
  const item = document.createElement("li");
  const subtitle = programme.subtitle ? `: ${programme.subtitle}` : "";
  item.append(`${when(programme.start)} – ${when(programme.stop)} · ${programme.title}${subtitle} `);
  if (programme.on_now) {
    item.append("(on now)");
    return item;
  }
  const play = document.createElement("button");
  play.type = "button";
  play.textContent = "Play when it starts";
  play.addEventListener("click", async () => {
    try {
      const entry = await api("/api/admin/schedule/programme", {
        method: "POST",
        body: JSON.stringify({ channel_id: channelId, start: programme.start, guide_version: guideVersion }),
      });
      say(`Scheduled: ${entry.programme_title}.`);
      await refreshSchedule();
    } catch (error) {
      say(error.message, true);
    }
  });
  item.append(play);
  return item;
}

document.getElementById("pick-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const channelId = document.getElementById("pick-channel").value;
  try {
    const answer = await api(`/api/admin/guide/programmes?channel_id=${encodeURIComponent(channelId)}`);
    list.replaceChildren(
      ...answer.programmes.map((programme) => programmeItem(channelId, answer.guide_version, programme)),
    );
    say(answer.programmes.length ? "" : "The guide has no programmes of this channel to come.");
  } catch (error) {
    list.replaceChildren();
    say(error.message, true);
  }
});
