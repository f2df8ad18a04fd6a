import { HOUR_MS, MINUTE_MS } from "../../platform/time.ts";
import type { Decision, Limits } from "../../rate-limit/types.ts";
import { type StoredCounters, Usage } from "../../rate-limit/window.ts";

/**
 * A block's life: a minute, and never past its hour. Its size follows the key's last minute, so a key keeping its
 * pace uses it up in about that long; and over a minute the sliding minute window frees at most `per_minute`
 * admissions, which is the most a block holds.
 */
const BLOCK_MS = MINUTE_MS;

/** How long after a block's end the key's alarm writes what it left unused, unless a newer block is in use by then. */
const RELEASE_AFTER_MS = 5_000;

/** A block in the key's state row: how many more admissions it may make, and until when (epoch ms, excluded). */
export interface StoredBlock {
  reserved: number;
  reserved_until: number;
}

interface Block {
  size: number;
  used: number;
  from: number;
  until: number;
}

/** Admissions a wake counts as made that may not have been: how many, and when. */
export interface Assumed {
  at: number;
  count: number;
}

/**
 * A key's rate-limit windows, exact in memory, kept in storage by reservation. An admission that no block covers
 * opens one: the admission and up to N − 1 more, N being the key's admissions of the last minute (this one
 * included), at most what every window has room for over the block's life (the hour and the day their remaining;
 * the minute its limit less the admissions still in it at the block's end). The caller writes the counts and the
 * block before it answers; the block's other admissions are answered from memory, with no write. On a wake, every
 * admission the stored block could still make is counted as made, at the latest moment it could have been made (the
 * wake, or the block's end), so no window holds fewer than were admitted: a restart can refuse too soon, never admit
 * too much.
 */
export class AdmissionWindow {
  private block: Block | undefined;

  private constructor(readonly usage: Usage) {}

  /** The windows a stored row holds, its block's admissions assumed made at `now` at the latest. */
  static woken(row: (StoredCounters & StoredBlock) | undefined, now: number): { window: AdmissionWindow; assumed?: Assumed } {
    const window = new AdmissionWindow(Usage.restored(row));
    if (!row || row.reserved === 0) return { window };
    const last = row.reserved_until - 1;
    // Within the block's hour even if the clock has stepped back: that is where its admissions were counted.
    const at = Math.min(last, Math.max(now, last - (last % HOUR_MS)));
    window.usage.assumeMade(at, row.reserved);
    return { window, assumed: { at, count: row.reserved } };
  }

  /**
   * Decides at `now` and counts an admission. `opened`: the admission opened a block, which the caller writes with
   * the counts (this admission's included) before it answers.
   */
  decide(now: number, limits: Limits): { decision: Decision; opened: boolean } {
    this.usage.slide(now);
    const decision = this.usage.decide(now, limits);
    if (!decision.allowed) return { decision, opened: false };
    const block = this.block;
    if (block && block.used < block.size && block.from <= now && now < block.until) {
      block.used++;
      return { decision, opened: false };
    }
    const { minuteLog, hour, day } = this.usage;
    const until = Math.min(now + BLOCK_MS, hour.start + HOUR_MS);
    // The block's admissions all fall in the minute before its end, beside the others still in it then.
    const othersAtTheEnd = minuteLog.filter((at) => at > until - 1 - MINUTE_MS).length - 1;
    const room = Math.min(limits.per_minute - othersAtTheEnd, 1 + limits.per_hour - hour.count, 1 + limits.per_day - day.count);
    this.block = { size: Math.max(1, Math.min(minuteLog.length, room)), used: 1, from: now, until };
    return { decision, opened: true };
  }

  /** What storage keeps of the block at `now`: the admissions it may still make (none once it has ended). */
  stored(now: number): StoredBlock {
    const block = this.block;
    return block && now < block.until
      ? { reserved: block.size - block.used, reserved_until: block.until }
      : { reserved: 0, reserved_until: 0 };
  }

  /** When to write what the block leaves unused, should it stay unused: undefined when it has nothing left to use. */
  releaseAt(now: number): number | undefined {
    const block = this.block;
    return block && block.used < block.size && now < block.until ? block.until + RELEASE_AFTER_MS : undefined;
  }
}
