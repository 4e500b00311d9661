//! Stream capture and replay on the simulated device: what a capturing
//! stream records instead of queuing (`Recipe`), the rules a capture keeps
//! (the runtime's, each refused with its [`CaptureRule`]), and a graph's
//! replay on streams of its own.
//!
//! A capture begins on one stream (its origin); a stream that waits for an
//! event recorded in the capture joins it; the capture ends on the origin,
//! once every stream that joined was joined back (its last task followed by
//! a record the origin waited for). The graph it ends into owns one private
//! stream per captured stream, created at the end — so its code is what
//! code memory held *then*, as a real graph's is — and a private event per
//! private stream, which a replay ends with.
//!
//! A replay is one task on the launch stream. When the stream reaches it,
//! it queues the graph's tasks on the private streams — the kernels
//! decoded again from their captured bytes, so what a block names in
//! device memory is read then — each stream's end record after them, and
//! it finishes once every end is recorded: what the launch stream holds
//! after it waits for the whole graph. (A graph launch decodes every
//! kernel once more at the call, to refuse a graph that cannot run before
//! anything is queued.)

use std::collections::BTreeMap;

use super::{DeviceState, StepResult, Stream, Task, TaskKind, TaskTag, TraceKind};
use crate::driver::sim::faults::RecordFate;
use crate::driver::sim::memory::Owner;
use crate::driver::{CaptureRule, DriverErrorKind, HandleKind, StreamId};

/// The owner of a graph's private streams and events: no `SimDriver` value
/// (their owners are never 0), so no driver call can name them.
pub(super) const GRAPH: Owner = Owner(0);

/// A task a capturing stream recorded.
pub(crate) enum Recipe {
    Aicore {
        index: usize,
        block_dim: u32,
        bytes: Box<[u8]>,
    },
    Aicpu {
        bytes: Box<[u8]>,
    },
    Record {
        event: u64,
    },
    Wait {
        event: u64,
    },
    Copy {
        dst: u64,
        src: u64,
        len: u64,
    },
    Memset {
        dst: u64,
        value: u8,
        len: u64,
    },
}

/// A capture not yet ended.
struct Open {
    owner: Owner,
    /// The streams in it, the origin first.
    streams: Vec<u64>,
    /// What they queued, in order: (stream's place in `streams`, task).
    tasks: Vec<(usize, Recipe)>,
    /// Each event recorded in it: the stream that recorded it last and
    /// that record's place in `tasks`.
    recorded: BTreeMap<u64, (usize, usize)>,
    /// Per stream: its last task's place in `tasks`.
    last: Vec<Option<usize>>,
    /// Per stream: the latest of its tasks the origin waited for.
    joined: Vec<Option<usize>>,
}

/// An ended capture.
struct Graph {
    owner: Owner,
    /// One private stream per captured stream, in the capture's order.
    streams: Vec<u64>,
    tasks: Vec<(usize, Recipe)>,
    /// The private event each private stream ends a replay with.
    ends: Vec<u64>,
}

/// A replay's tasks, apart from its kernels: the private streams, their
/// end events, each task's stream and its event (record: `true`), and
/// each copy or memset.
struct Plan {
    streams: Vec<u64>,
    ends: Vec<u64>,
    tasks: Vec<(usize, Option<(u64, bool)>)>,
    plain: Vec<Option<TaskKind>>,
}

/// Every capture and graph of one device.
#[derive(Default)]
pub(crate) struct Captures {
    /// Open captures, by id.
    open: BTreeMap<u64, Open>,
    /// Which open capture each capturing stream belongs to.
    of_stream: BTreeMap<u64, u64>,
    graphs: BTreeMap<u64, Graph>,
}

fn rule(rule: CaptureRule) -> DriverErrorKind {
    DriverErrorKind::Capture { rule }
}

fn bad_graph(raw: u64) -> DriverErrorKind {
    DriverErrorKind::BadHandle {
        kind: HandleKind::Graph,
        raw,
    }
}

impl DeviceState {
    /// The open capture `stream` belongs to.
    #[inline]
    pub(super) fn capturing(&self, stream: u64) -> Option<u64> {
        if self.captures.of_stream.is_empty() {
            return None;
        }
        self.captures.of_stream.get(&stream).copied()
    }

    /// Refused while `stream` captures: a synchronous call on it.
    pub fn no_sync_on_stream(&self, stream: u64) -> Result<(), DriverErrorKind> {
        match self.capturing(stream) {
            Some(_) => Err(rule(CaptureRule::SyncWhileCapturing)),
            None => Ok(()),
        }
    }

    /// Refused while `event`'s last record is in an open capture: a
    /// synchronous call on it.
    pub fn no_sync_on_event(&self, event: u64) -> Result<(), DriverErrorKind> {
        if self
            .captures
            .open
            .values()
            .any(|c| c.recorded.contains_key(&event))
        {
            return Err(rule(CaptureRule::SyncWhileCapturing));
        }
        Ok(())
    }

    pub fn capture_begin(&mut self, owner: Owner, stream: u64) -> Result<(), DriverErrorKind> {
        self.check_own_stream(owner, stream)?;
        if !self.cfg.capture {
            return Err(rule(CaptureRule::NotCapturable));
        }
        if self.capturing(stream).is_some() {
            return Err(rule(CaptureRule::AlreadyCapturing));
        }
        let id = self.handle();
        self.captures.open.insert(
            id,
            Open {
                owner,
                streams: vec![stream],
                tasks: Vec::new(),
                recorded: BTreeMap::new(),
                last: vec![None],
                joined: vec![None],
            },
        );
        self.captures.of_stream.insert(stream, id);
        self.stats.captures += 1;
        Ok(())
    }

    /// `stream`'s place in capture `c` (it captures into `c`).
    fn place(&self, c: u64, stream: u64) -> Result<usize, DriverErrorKind> {
        self.captures
            .open
            .get(&c)
            .and_then(|o| o.streams.iter().position(|&s| s == stream))
            .ok_or(rule(CaptureRule::NotCapturing))
    }

    /// Records `task` of `stream` into capture `c`.
    pub(super) fn capture_push(
        &mut self,
        c: u64,
        stream: u64,
        task: Recipe,
    ) -> Result<(), DriverErrorKind> {
        let at = self.place(c, stream)?;
        let o = self
            .captures
            .open
            .get_mut(&c)
            .ok_or(rule(CaptureRule::NotCapturing))?;
        let n = o.tasks.len();
        if let Recipe::Record { event } = task {
            o.recorded.insert(event, (at, n));
        }
        o.tasks.push((at, task));
        o.last[at] = Some(n);
        Ok(())
    }

    pub(super) fn capture_record(
        &mut self,
        c: u64,
        stream: u64,
        event: u64,
    ) -> Result<(), DriverErrorKind> {
        self.capture_push(c, stream, Recipe::Record { event })
    }

    /// A wait of `stream` for `event`, as capture sees it: `Ok(true)` when
    /// captured (and `stream` joined the capture if it was not in it),
    /// `Ok(false)` when neither is capturing, refused when a capturing
    /// stream waits for an event recorded outside its capture.
    pub(super) fn capture_wait(
        &mut self,
        owner: Owner,
        stream: u64,
        event: u64,
    ) -> Result<bool, DriverErrorKind> {
        if self.captures.open.is_empty() {
            return Ok(false);
        }
        let of_event = self
            .captures
            .open
            .iter()
            .find(|(_, o)| o.recorded.contains_key(&event))
            .map(|(&id, _)| id);
        let c = match (self.capturing(stream), of_event) {
            (None, None) => return Ok(false),
            (Some(c), Some(e)) if c == e => c,
            (None, Some(e)) => {
                // The stream joins the capture that recorded the event.
                self.check_own_stream(owner, stream)?;
                let o = self
                    .captures
                    .open
                    .get_mut(&e)
                    .ok_or(rule(CaptureRule::NotCapturing))?;
                o.streams.push(stream);
                o.last.push(None);
                o.joined.push(None);
                self.captures.of_stream.insert(stream, e);
                e
            }
            _ => return Err(rule(CaptureRule::OutsideDependency)),
        };
        let at = self.place(c, stream)?;
        if let Some(o) = self.captures.open.get_mut(&c)
            && at == 0
            && let Some(&(from, task)) = o.recorded.get(&event)
        {
            // The origin waits for `from`'s record: `from` is joined up to it.
            o.joined[from] = o.joined[from].max(Some(task));
        }
        self.capture_push(c, stream, Recipe::Wait { event })?;
        Ok(true)
    }

    /// Ends the capture begun on `stream` into a graph (see the module
    /// docs); the capture ends either way.
    pub fn capture_end(&mut self, owner: Owner, stream: u64) -> Result<u64, DriverErrorKind> {
        self.own_stream(owner, stream)?;
        let c = self
            .capturing(stream)
            .ok_or(rule(CaptureRule::NotCapturing))?;
        if self.place(c, stream)? != 0 {
            return Err(rule(CaptureRule::NotCapturing));
        }
        let Some(open) = self.captures.open.remove(&c) else {
            return Err(rule(CaptureRule::NotCapturing));
        };
        self.captures.of_stream.retain(|_, &mut id| id != c);
        let unjoined = (1..open.streams.len()).any(|i| open.last[i] > open.joined[i]);
        if unjoined {
            return Err(rule(CaptureRule::Unjoined));
        }
        let streams = open
            .streams
            .iter()
            .map(|_| self.create_stream_of(GRAPH, true))
            .collect();
        let ends = open
            .streams
            .iter()
            .map(|_| self.create_event_of(GRAPH, true))
            .collect();
        let id = self.handle();
        self.captures.graphs.insert(
            id,
            Graph {
                owner: open.owner,
                streams,
                tasks: open.tasks,
                ends,
            },
        );
        Ok(id)
    }

    /// Queues one replay of `graph` on `stream` (see the module docs).
    /// Refused whole — nothing queued — when a private stream faulted (the
    /// graph is broken: destroy it) or a captured block no longer decodes.
    pub fn graph_launch(
        &mut self,
        owner: Owner,
        graph: u64,
        stream: u64,
    ) -> Result<(), DriverErrorKind> {
        self.check_own_stream(owner, stream)?;
        if self.capturing(stream).is_some() {
            return Err(rule(CaptureRule::AlreadyCapturing));
        }
        self.own_graph(owner, graph)?;
        let g = self.captures.graphs.get(&graph).ok_or(bad_graph(graph))?;
        for &p in &g.streams {
            self.check_stream(p)?;
        }
        // Every kernel decodes now (it decodes again when the replay
        // starts, reading what its block names then).
        let (kernels, plan) = self.replay_plan(graph)?;
        // The graph's records are made now, in order, as a record call's.
        let mut records = Vec::new();
        for (_, ev) in &plan.tasks {
            if let Some((event, true)) = *ev {
                let fate = self.faults.on_record(crate::driver::abi::duration_to_ticks);
                if let Some(e) = self.events.get_mut(&event) {
                    e.recorded += 1;
                    e.stream = stream;
                    records.push((event, e.recorded, fate));
                }
            }
        }
        self.enqueue(
            owner,
            stream,
            TaskKind::Graph {
                graph,
                ends: Vec::new(),
                records,
            },
        )?;
        // The trace has the host's view: the graph's kernels are enqueued
        // now, each on the graph's stream it will start on.
        let now = self.now();
        let on = plan
            .tasks
            .iter()
            .zip(&plan.plain)
            .filter(|((_, ev), plain)| ev.is_none() && plain.is_none())
            .map(|((at, _), _)| plan.streams[*at]);
        let traced: Vec<(u64, u64, TaskTag)> = on
            .zip(&kernels)
            .map(|(p, k)| (p, k.run(), k.tag()))
            .collect();
        for (p, run, tag) in traced {
            self.push_trace_at(now, p, run, TraceKind::Enqueued(tag));
        }
        self.stats.graph_launches += 1;
        Ok(())
    }

    /// The graph a stream's head task replays, if it is a replay.
    pub(super) fn head_graph(&self, stream: u64) -> Option<u64> {
        match self.streams.get(&stream)?.queue.front()?.kind {
            TaskKind::Graph { graph, .. } => Some(graph),
            _ => None,
        }
    }

    /// Starts the replay at the head of `stream`: the graph's tasks are
    /// queued on its streams (its kernels decoded from what their blocks
    /// name now), and the replay waits for each stream's end. A graph that
    /// is gone, or a block that no longer decodes, faults the stream.
    pub(super) fn start_graph(&mut self, stream: u64, graph: u64, now: u64) -> StepResult {
        let records = match self
            .streams
            .get_mut(&stream)
            .and_then(|s| s.queue.front_mut())
        {
            Some(Task {
                kind: TaskKind::Graph { records, .. },
                ..
            }) => std::mem::take(records),
            _ => Vec::new(),
        };
        let ends = self.expand(graph, &records);
        let Some(head) = self
            .streams
            .get_mut(&stream)
            .and_then(|s| s.queue.front_mut())
        else {
            return StepResult::Idle;
        };
        head.started = Some(now);
        let run = head.run;
        match ends {
            Ok(e) => {
                if let TaskKind::Graph { ends, .. } = &mut head.kind {
                    *ends = e;
                }
                self.push_trace(
                    stream,
                    run,
                    super::TraceKind::Started(super::TaskTag::Graph),
                );
            }
            Err(_) => self.fault_stream(stream, crate::driver::FaultKind::AicoreException),
        }
        StepResult::Progress
    }

    /// Queues `graph`'s tasks on its private streams; the end events and
    /// generations its replay waits for.
    fn expand(
        &mut self,
        graph: u64,
        records: &[(u64, u64, RecordFate)],
    ) -> Result<Vec<(u64, u64)>, DriverErrorKind> {
        let (decoded, plan) = self.replay_plan(graph)?;
        let Plan {
            streams,
            ends,
            tasks,
            plain,
        } = plan;
        let mut decoded = decoded.into_iter();
        let mut made = records.iter();
        // The generation of each event recorded so far in this replay.
        let mut latest = BTreeMap::new();
        for ((at, ev), plain) in tasks.into_iter().zip(plain) {
            let p = streams[at];
            match (ev, plain) {
                (Some((_, true)), _) => {
                    if let Some(&(event, generation, fate)) = made.next() {
                        latest.insert(event, generation);
                        let task = TaskKind::Record {
                            event,
                            generation,
                            fate,
                        };
                        self.enqueue(GRAPH, p, task)?;
                    }
                }
                (Some((event, false)), _) => match latest.get(&event) {
                    Some(&generation) => {
                        self.enqueue(GRAPH, p, TaskKind::Wait { event, generation })?;
                    }
                    None => self.wait_now(GRAPH, p, event)?,
                },
                (None, Some(task)) => self.enqueue(GRAPH, p, task)?,
                (None, None) => {
                    if let Some(task) = decoded.next() {
                        self.enqueue(GRAPH, p, task)?;
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(ends.len());
        for (&p, &end) in streams.iter().zip(&ends) {
            // The graph's own records: no injected fate (the fault plan
            // counts the records a caller asked for, the graph's included).
            let e = self
                .events
                .get_mut(&end)
                .ok_or(DriverErrorKind::BadHandle {
                    kind: HandleKind::Event,
                    raw: end,
                })?;
            e.recorded += 1;
            e.stream = p;
            let generation = e.recorded;
            let fate = RecordFate::default();
            self.enqueue(
                GRAPH,
                p,
                TaskKind::Record {
                    event: end,
                    generation,
                    fate,
                },
            )?;
            out.push((end, generation));
        }
        Ok(out)
    }

    /// What a replay of `graph` queues: its kernels decoded again (from
    /// their captured bytes, reading what those name in memory now), and
    /// the rest of its tasks in order.
    fn replay_plan(&mut self, graph: u64) -> Result<(Vec<TaskKind>, Plan), DriverErrorKind> {
        let g = self.captures.graphs.get(&graph).ok_or(bad_graph(graph))?;
        let mut kernels = Vec::new();
        for (_, t) in &g.tasks {
            match t {
                Recipe::Aicore {
                    index,
                    block_dim,
                    bytes,
                } => kernels.push((*index, *block_dim, bytes.clone())),
                Recipe::Aicpu { bytes } => kernels.push((usize::MAX, 0, bytes.clone())),
                _ => {}
            }
        }
        let mut decoded = Vec::with_capacity(kernels.len());
        for (index, block_dim, bytes) in kernels {
            decoded.push(if index == usize::MAX {
                self.aicpu_task(&bytes)?
            } else {
                self.aicore_task(index, block_dim, &bytes)?
            });
        }
        let g = self.captures.graphs.get(&graph).ok_or(bad_graph(graph))?;
        let (streams, ends) = (g.streams.clone(), g.ends.clone());
        let tasks: Vec<(usize, Option<(u64, bool)>)> = g
            .tasks
            .iter()
            .map(|(at, t)| {
                (
                    *at,
                    match t {
                        Recipe::Record { event } => Some((*event, true)),
                        Recipe::Wait { event } => Some((*event, false)),
                        _ => None,
                    },
                )
            })
            .collect();
        let plain: Vec<Option<TaskKind>> = g
            .tasks
            .iter()
            .map(|(_, t)| match *t {
                Recipe::Copy { dst, src, len } => Some(TaskKind::Copy { dst, src, len }),
                Recipe::Memset { dst, value, len } => Some(TaskKind::Memset { dst, value, len }),
                _ => None,
            })
            .collect();
        Ok((
            decoded,
            Plan {
                streams,
                ends,
                tasks,
                plain,
            },
        ))
    }

    /// `Ok` when `graph` is `owner`'s.
    pub fn own_graph(&self, owner: Owner, graph: u64) -> Result<(), DriverErrorKind> {
        match self.captures.graphs.get(&graph) {
            Some(g) if g.owner == owner => Ok(()),
            _ => Err(bad_graph(graph)),
        }
    }

    /// Whether no replay of `graph` is queued or running (a faulted
    /// stream runs nothing).
    pub fn graph_idle(&self, graph: u64) -> bool {
        let Some(g) = self.captures.graphs.get(&graph) else {
            return true;
        };
        let busy = |s: &Stream| s.fault.is_none() && !s.queue.is_empty();
        !g.streams
            .iter()
            .any(|p| self.streams.get(p).is_some_and(busy))
            && !self.streams.values().any(|s| {
                s.fault.is_none()
                    && s.queue
                        .iter()
                        .any(|t| matches!(t.kind, TaskKind::Graph { graph: g2, .. } if g2 == graph))
            })
    }

    /// Tasks of `graph`'s replays not yet done: those on its unfaulted
    /// private streams, and every task of a replay still queued whole.
    pub fn graph_work_left(&self, graph: u64) -> usize {
        let Some(g) = self.captures.graphs.get(&graph) else {
            return 0;
        };
        let live = |s: &&Stream| s.fault.is_none();
        let private = g.streams.iter().filter_map(|p| self.streams.get(p));
        let left: usize = private.filter(live).map(|s| s.queue.len()).sum();
        let queued = self.streams.values().filter(live).flat_map(|s| &s.queue);
        let is_replay =
            |t: &&Task| matches!(t.kind, TaskKind::Graph { graph: r, .. } if r == graph);
        left + queued.filter(is_replay).count() * (g.tasks.len() + g.ends.len())
    }

    /// Destroys `graph`, its private streams and events; refused while a
    /// replay of it is on a private stream (unless that stream faulted).
    pub fn graph_destroy(&mut self, owner: Owner, graph: u64) -> Result<(), DriverErrorKind> {
        self.own_graph(owner, graph)?;
        if !self.graph_idle(graph) {
            return Err(rule(CaptureRule::GraphRunning));
        }
        let Some(g) = self.captures.graphs.remove(&graph) else {
            return Err(bad_graph(graph));
        };
        for p in g.streams {
            self.streams.remove(&p);
            self.push_trace(p, 0, super::TraceKind::StreamDestroyed);
        }
        for e in g.ends {
            self.events.remove(&e);
        }
        Ok(())
    }

    /// Graphs not yet destroyed (for the stats and the tests).
    pub fn graphs_live(&self) -> usize {
        self.captures.graphs.len()
    }

    /// A new stream of `owner`; `private` for a graph's (never counted as
    /// a created stream, nor named by any driver call).
    pub(super) fn create_stream_of(&mut self, owner: Owner, private: bool) -> u64 {
        let id = self.handle();
        self.streams.insert(
            id,
            Stream {
                owner,
                queue: std::collections::VecDeque::new(),
                icache: self.code.clone(),
                fault: None,
                last_end: 0,
                last_run: 0,
            },
        );
        if !private {
            self.stats.streams_created += 1;
        }
        self.stats
            .tasks_run
            .entry(StreamId::from_raw(id))
            .or_insert(0);
        self.push_trace(id, 0, super::TraceKind::StreamCreated);
        id
    }
}
