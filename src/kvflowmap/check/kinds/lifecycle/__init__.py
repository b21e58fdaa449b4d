"""``lifecycle``: obligations on the request-lifecycle model
(``kvflowmap.lifecycle``), one mode per obligation:

- ``dropped``: no path drops a request id it carries;
- ``thread_loop``: a background serving loop survives its exceptions;
- ``delayed_free``: a delayed free is always followed by a save;
- ``delay_expires``: a delayed free that only a peer's message ends can expire;
- ``reset_forwards``: resetting tracked ids forwards them first;
- ``balanced``: ids that enter a container can leave it, and a drained one is filled;
- ``parked_recorded``: a request the probe can park is recorded by the commit hook;
- ``failed_blocks``: failed loads reach the failed-blocks hook;
- ``removed_together``: state removed together is removed together on every way of ending;
- ``reported_left``: an id reported finished leaves the container it was pending in;
- ``unreported``: an id a report function takes out of pending state is reported;
- ``unlocked``: request-keyed state is changed under the lock its other changes hold;
- ``completed``: a future a function is handed is completed on every way out;
- ``counted``: pending state a request can enter twice before it completes counts;
- ``stalled``: pending loads polled by the report hooks can give up (an age arm);
- ``asserted``: no assert that an entry is still where another path removes it;
- ``announced``: a request announced to the workers is announced again on every way it finishes;
- ``step_released``: a per-request release of the step's requests runs on every exit;
- ``reported_once``: an id is reported only while still pending when another path reports too;
- ``shutdown_closes``: the shutdown hook closes what the connector's objects hold;
- ``polled_acted``: a polled transfer seen done is reported, taken out or handed on;
- ``replied``: a serving loop on a REP socket answers every request it receives;
- ``peer_checked``: an id read off a peer's message is looked up before it is reported;
- ``resumed``: the new blocks of a request resumed after preemption replace its old ones;
- ``unbound``: a name a ``try`` binds is bound on every way past its handler;
- ``failed_init``: a finalizer reads only what ``__init__`` sets before it can fail;
- ``clock_crossed``: a process-local clock reading stays in its process;
- ``cache_kept``: a cache lookup's miss branch keeps what it makes;
- ``trigger_consumed``: the commit hook consumes the request's remote-load trigger;
- ``outcome_raised``: a report hook survives a failed transfer's re-raised exception;
- ``notice_sent``: an arm that only logs sends the peer notice its sibling arm sends;
- ``parts_done``: an entry of several parts is removed once all are done, not in the loop over them;
- ``load_chosen``: the commit hook records a load only when vLLM chose the connector to load;
- ``handoff_order``: a request is registered where a background worker looks it up before it is handed to it;
- ``retired``: background work that retires its item's entry from the connector's state does so on every way out;
- ``metadata_bound``: a hook vLLM may call with no step metadata bound tests it before reading it;
- ``growth``: state a connector's hooks fill, and the code drains elsewhere, is drained by what its hooks run;
- ``count_moved``: a per-id count read for a completion moves on every way on.
"""

from __future__ import annotations

from kvflowmap.check.kinds.lifecycle import (announced, asserted, balanced, cache_kept, clock_crossed, completed, count_moved, counted, delay_expires, delayed_free, dropped,
                                             failed_blocks, failed_init, growth, handoff_order, load_chosen, metadata_bound, notice_sent, outcome_raised, parts_done,
                                             parked_recorded, peer_checked, polled_acted, removed_together, replied, reported_left, reported_once,
                                             reset_forwards, resumed, retired, shutdown_closes, stalled,
                                             step_released,
                                             thread_loop, trigger_consumed, unbound, unlocked, unreported)
from kvflowmap.check.kinds.spec import KindSpec

MODES: dict[str, KindSpec] = {
    "dropped": KindSpec(dropped.Options, dropped.check, dropped.READS),
    "thread_loop": KindSpec(thread_loop.Options, thread_loop.check, thread_loop.READS),
    "delayed_free": KindSpec(delayed_free.Options, delayed_free.check, delayed_free.READS),
    "delay_expires": KindSpec(delay_expires.Options, delay_expires.check, delay_expires.READS),
    "reset_forwards": KindSpec(reset_forwards.Options, reset_forwards.check,
                               reset_forwards.READS),
    "balanced": KindSpec(balanced.Options, balanced.check, balanced.READS),
    "parked_recorded": KindSpec(parked_recorded.Options, parked_recorded.check,
                                parked_recorded.READS),
    "failed_blocks": KindSpec(failed_blocks.Options, failed_blocks.check, failed_blocks.READS),
    "removed_together": KindSpec(removed_together.Options, removed_together.check,
                                 removed_together.READS),
    "reported_left": KindSpec(reported_left.Options, reported_left.check, reported_left.READS),
    "unreported": KindSpec(unreported.Options, unreported.check, unreported.READS),
    "unlocked": KindSpec(unlocked.Options, unlocked.check, unlocked.READS),
    "completed": KindSpec(completed.Options, completed.check, completed.READS),
    "counted": KindSpec(counted.Options, counted.check, counted.READS),
    "count_moved": KindSpec(count_moved.Options, count_moved.check, count_moved.READS),
    "stalled": KindSpec(stalled.Options, stalled.check, stalled.READS),
    "asserted": KindSpec(asserted.Options, asserted.check, asserted.READS),
    "announced": KindSpec(announced.Options, announced.check, announced.READS),
    "step_released": KindSpec(step_released.Options, step_released.check,
                              step_released.READS),
    "reported_once": KindSpec(reported_once.Options, reported_once.check,
                              reported_once.READS),
    "peer_checked": KindSpec(peer_checked.Options, peer_checked.check, peer_checked.READS),
    "replied": KindSpec(replied.Options, replied.check, replied.READS),
    "polled_acted": KindSpec(polled_acted.Options, polled_acted.check, polled_acted.READS),
    "shutdown_closes": KindSpec(shutdown_closes.Options, shutdown_closes.check,
                                shutdown_closes.READS),
    "resumed": KindSpec(resumed.Options, resumed.check, resumed.READS),
    "unbound": KindSpec(unbound.Options, unbound.check, unbound.READS),
    "failed_init": KindSpec(failed_init.Options, failed_init.check, failed_init.READS),
    "clock_crossed": KindSpec(clock_crossed.Options, clock_crossed.check,
                              clock_crossed.READS),
    "cache_kept": KindSpec(cache_kept.Options, cache_kept.check, cache_kept.READS),
    "notice_sent": KindSpec(notice_sent.Options, notice_sent.check, notice_sent.READS),
    "outcome_raised": KindSpec(outcome_raised.Options, outcome_raised.check,
                               outcome_raised.READS),
    "trigger_consumed": KindSpec(trigger_consumed.Options, trigger_consumed.check,
                                 trigger_consumed.READS),
    "parts_done": KindSpec(parts_done.Options, parts_done.check, parts_done.READS),
    "load_chosen": KindSpec(load_chosen.Options, load_chosen.check, load_chosen.READS),
    "handoff_order": KindSpec(handoff_order.Options, handoff_order.check,
                              handoff_order.READS),
    "retired": KindSpec(retired.Options, retired.check, retired.READS),
    "metadata_bound": KindSpec(metadata_bound.Options, metadata_bound.check,
                               metadata_bound.READS),
    "growth": KindSpec(growth.Options, growth.check, growth.READS),
}

__all__ = ["MODES"]
