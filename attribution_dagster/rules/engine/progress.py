"""Training progress as evidence: did the job keep advancing after a fault?

A fault after which training went on for `progress_grace_seconds` (on the nodes it hit, else
anywhere in the job) did not stop the job: it is demoted like a storage blip that cleared. A
symptom after which training went on does not mark the failure onset. A fault after which
progress stopped stays the cause, and the result names the stall.
"""

from __future__ import annotations

from datetime import datetime

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.observation import Observation
from attribution_dagster.rules.engine.items import FAR_FUTURE, Cand, Item, hms, secs, utc
from attribution_dagster.rules.engine.rulebook import EngineTuning

Progress = dict[str, Observation]  # node -> its last training progress line


def last_progress(observations: list[Observation], ctx: ExecutionContext) -> Progress:
    """Per node, its last training progress line (step / iteration / loss)."""
    last: Progress = {}
    nodes = set(ctx.nodes)
    end = utc(ctx.end)
    for o in observations:
        if o.kind != "progress" or o.time is None or o.node not in nodes:
            continue
        if end is not None and secs(utc(o.time), end) > 0:  # type: ignore[arg-type]
            continue  # after the job ended: another run's output in the same file
        cur = last.get(o.node)
        if cur is None or utc(o.time) > utc(cur.time):  # type: ignore[operator]
            last[o.node] = o
    return last


def progress_note(progress: Progress, tuning: EngineTuning) -> str:
    """Last training progress of the job, and the node that stopped first when it stopped
    clearly earlier than the others (who fell first)."""
    ordered = sorted(progress.values(), key=lambda o: utc(o.time))  # type: ignore[arg-type,return-value]
    last, first = ordered[-1], ordered[0]
    step = last.attrs.get("step")
    note = f"training progress: last logged at {hms(utc(last.time))} on {last.node}" + (
        f" (step {step})" if step is not None else ""
    )
    t_first, t_last = utc(first.time), utc(last.time)
    assert t_first is not None and t_last is not None
    if len(ordered) > 1 and secs(t_last, t_first) >= tuning.silence_seconds:
        note += f"; {first.node} stopped first, at {hms(t_first)}"
    return note


def outlived(
    s: Item, progress: Progress, tuning: EngineTuning, latest: datetime | None = None
) -> bool:
    """Training progressed `progress_grace_seconds` after this symptom's latest possible
    time (on its node, else anywhere in the job): it was not the failure's onset.
    `latest`: the job's last progress time, when the caller has it (`latest_progress`)."""
    if not progress or s.hi >= FAR_FUTURE:
        return False
    mine = progress.get(s.obs.node)
    if mine is not None:
        t_last = utc(mine.time)
    else:
        t_last = latest if latest is not None else latest_progress(progress)
    assert t_last is not None
    return secs(t_last, s.hi) >= tuning.progress_grace_seconds


def latest_progress(progress: Progress) -> datetime | None:
    """The job's last training progress time (any node), None without progress."""
    return max((utc(o.time) for o in progress.values()), default=None)  # type: ignore[type-var]


def outlived_ids(symptoms: list[Item], progress: Progress, tuning: EngineTuning) -> set[int]:
    """`id()` of each symptom training outlived (`outlived`); the job's last progress time
    is read once, not once per symptom (8,192 watchdog timeouts on 1,024 nodes)."""
    if not progress:
        return set()
    latest = latest_progress(progress)
    return {id(s) for s in symptoms if outlived(s, progress, tuning, latest)}


def progressed(c: Cand, progress: Progress, tuning: EngineTuning) -> None:
    """A fault after which training kept advancing for minutes (on the nodes it hit, else
    anywhere in the job) did not stop the job: demote it, the way a storage blip that
    cleared is demoted. Its last occurrence counts (a fault that repeats until the end
    is not excused by progress after its first one)."""
    if c.rule.late_ok or c.demoted or not progress or c.t is None:
        return
    mine = [progress[n] for n in c.affected if n in progress]
    seen = mine or list(progress.values())
    last = max(seen, key=lambda o: utc(o.time))  # type: ignore[arg-type,return-value]
    t_last = utc(last.time)
    fault_last = max(i.hi for i in c.items)  # provably before the progress
    assert t_last is not None
    gap = secs(t_last, fault_last)
    if gap < tuning.progress_grace_seconds:
        return
    step = last.attrs.get("step")
    c.score = round(c.score - tuning.late_penalty, 2)
    c.demoted = (
        f"training went on for {gap / 60:.0f} min after it (last progress "
        f"{'step ' + str(step) + ' ' if step is not None else ''}on {last.node} at "
        f"{hms(t_last)}): not what stopped the job"
    )
    c.notes.append(f"{c.summary} {c.demoted}")


def stall_note(
    top: Cand, progress: Progress, ctx: ExecutionContext, tuning: EngineTuning
) -> str | None:
    """Name the stall: where training progress stopped relative to the cause."""
    if not progress or top.rule.late_ok or top.t is None:
        return None
    last = max(progress.values(), key=lambda o: utc(o.time))  # type: ignore[arg-type,return-value]
    t_last = utc(last.time)
    assert t_last is not None
    step = last.attrs.get("step")
    what = f"step {step} " if step is not None else ""
    gap = secs(t_last, top.t)
    if gap > tuning.progress_grace_seconds:
        return None
    tail = (
        f"; the job then sat until it ended {ctx.state.value} at {hms(utc(ctx.end))}"
        if ctx.state is JobState.TIMEOUT
        else ""
    )
    when = f"{-gap:.0f} s before" if gap <= 0 else f"{gap:.0f} s after"
    return (
        f"training stalled: the last progress line ({what}on {last.node}) was logged at "
        f"{hms(t_last)}, {when} the fault{tail}"
    )
