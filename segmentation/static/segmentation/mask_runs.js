// Sets of frames as runs: sorted, disjoint, inclusive [first, last] pairs, apart by at least one
// frame. An hour propagated is one run, so the frames with masks or prompts of any video are a
// few numbers, never a list per frame.

export class Runs {
  constructor(runs = []) {
    this.runs = runs.map(([first, last]) => [first, last]); // as the server sends them: in order
  }

  // The index of the first run that ends at or after the frame.
  find(frameIndex) {
    let low = 0;
    let high = this.runs.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.runs[middle][1] < frameIndex) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  has(frameIndex) {
    const run = this.runs[this.find(frameIndex)];
    return run !== undefined && run[0] <= frameIndex;
  }

  add(frameIndex) {
    const i = this.find(frameIndex - 1); // a run ending just before the frame joins it
    const run = this.runs[i];
    if (run && run[0] <= frameIndex && frameIndex <= run[1]) return;
    if (run && run[1] === frameIndex - 1) {
      run[1] = frameIndex;
      const next = this.runs[i + 1];
      if (next && next[0] === frameIndex + 1) {
        run[1] = next[1];
        this.runs.splice(i + 1, 1);
      }
    } else if (run && run[0] === frameIndex + 1) {
      run[0] = frameIndex;
    } else {
      this.runs.splice(i, 0, [frameIndex, frameIndex]);
    }
  }

  delete(frameIndex) {
    const i = this.find(frameIndex);
    const run = this.runs[i];
    if (!run || run[0] > frameIndex) return;
    if (run[0] === run[1]) this.runs.splice(i, 1);
    else if (run[0] === frameIndex) run[0]++;
    else if (run[1] === frameIndex) run[1]--;
    else this.runs.splice(i, 1, [run[0], frameIndex - 1], [frameIndex + 1, run[1]]);
  }

  // How many frames the runs hold.
  get size() {
    return this.runs.reduce((count, [first, last]) => count + last - first + 1, 0);
  }

  // "0-11,40-40": the runs, as the timeline's data attributes give them.
  toString() {
    return this.runs.map(([first, last]) => `${first}-${last}`).join(",");
  }

  // The frames in any of the sets.
  static union(sets) {
    const all = sets.flatMap((set) => set.runs).sort((a, b) => a[0] - b[0]);
    const merged = [];
    for (const [first, last] of all) {
      const end = merged[merged.length - 1];
      if (end && first <= end[1] + 1) end[1] = Math.max(end[1], last);
      else merged.push([first, last]);
    }
    return new Runs(merged);
  }

  // The frames of this set in `other` (inside true) or not in it (inside false), as runs.
  split(other, inside) {
    const parts = [];
    for (const [first, last] of this.runs) {
      let at = first;
      for (let i = other.find(first); i < other.runs.length && other.runs[i][0] <= last; i++) {
        const [a, b] = other.runs[i];
        const from = Math.max(a, first);
        const to = Math.min(b, last);
        if (!inside && from > at) parts.push([at, from - 1]);
        if (inside) parts.push([from, to]);
        at = to + 1;
      }
      if (!inside && at <= last) parts.push([at, last]);
    }
    return new Runs(parts);
  }
}
