// The annotator page's elements (templates/segmentation/annotate.html), by what they are to the
// page's modules.

const $ = (id) => document.getElementById(id);
export const ui = {
  engine: $("engine"),
  editor: $("editor"),
  name: $("video-name"),
  message: $("message"),
  frame: $("frame"),
  overlay: $("overlay"),
  play: $("play"),
  scrubber: $("scrubber"),
  frameLabel: $("frame-label"),
  goto: $("goto"),
  timeline: $("timeline"),
  objects: $("objects"),
  addObject: $("add-object"),
  mode: $("mode"),
  clearFrame: $("clear-frame"),
  clearAll: $("clear-all"),
  propagate: $("propagate"),
  markEnd: $("mark-end"),
  direction: $("direction"),
  cancel: $("cancel"),
  progress: $("progress"),
  progressLabel: $("progress-label"),
  exportJson: $("export-json"),
  exportZip: $("export-zip"),
  exportCoco: $("export-coco"),
  exportYolo: $("export-yolo"),
  importFile: $("import-file"),
};
