// What the annotator page holds while it runs: the video, its session, the objects and their
// prompts, the operations under way and where the person is. One object, which the page's
// modules share and change.

export const state = {
  video: null,
  sessionId: null,
  keepsWork: false, // the session's work is in the server's store: its exports stream from there
  frames: null,
  annotations: null,
  frameIndex: 0,
  objects: [], // object IDs, in the order they were made
  nextObjectId: 1,
  selected: null,
  points: new Map(), // "frame:object" -> [{x, y, label}] in video pixels; a box first (2, 3)
  given: new Set(), // "frame:object" of imported masks without clicks: prompts on the server
  colours: new Map(), // object ID -> {colour, under}: its colour, and once its first mask is
  // shown the mean colour under it (its colour then changed if it was near)
  frameOnCanvas: null, // the frame index whose image the frame canvas holds
  tapLabel: 1,
  drag: null, // the press on the frame that may become a box: {start, end, screen, boxing}
  dragged: false, // the press just released drew a box: the click that follows it is not a click
  playing: null, // the running playback, if any
  propagation: null, // the propagation followed: {job (the server's, once started), cancelling}
  propagated: null, // the frames the running propagation has stored, as Runs
  endFrame: null, // the frame marked as the propagation's end, or null: the video's end
  queue: Promise.resolve(),
  epoch: 0, // counts "clear all"s
  drawn: 0, // the latest frame request; older ones that arrive late are not drawn
  leaving: false, // a link of the site's header was followed
  importing: false, // an annotation import is under way (it may wait out the server's limits)
  pending: 0, // operations queued or running
};
