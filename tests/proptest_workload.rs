//! Device buffers and host tensors under any sequence of use: random
//! binds, host reads and writes, forgotten and dropped runs, buffer drops
//! and allocations, checked against a small sequential model.
//!
//! **Typed runs** (`typed_*`): a pool of `u32` device buffers (a few
//! elements each) on a stepped simulator at depth 2, 3 and 4. Operations
//! come in phases: host phases (write, read, drop a buffer, allocate one,
//! scribble on a host output, drain) and batches of typed runs, launched
//! and kept alive together — several queued before any is fenced, sharing
//! buffers in stream order — then each finalized, forgotten or dropped, in
//! a generated order. (The borrow checker forces the phases: a live run
//! borrows the pool; what forgetting a run leaves behind is what the run
//! time must check.) The model computes every run in launch order and
//! tracks, as the contract documents them, the runs the device may still
//! be running (launched, not yet proven complete: a forgotten run stays
//! until a host access of a buffer it bound last waits for it, or a
//! drain), the slots forgotten runs hold, and the dropped buffers not yet
//! freed. Its checkers, each with its own message:
//!
//! - **read**: a host read equals the model (after a forgotten run that
//!   wrote the buffer: that run's result — the read waited for it);
//! - **host output**: a finalized run's host output is its result; a
//!   forgotten or dropped run's is never written (it keeps what the host
//!   last put there, through every later finalize);
//! - **live allocations** / **quarantined**: a dropped buffer's memory is
//!   freed only once no run still in flight bound it, and then at the next
//!   allocation or drain (`SimStats::live_allocations`,
//!   `Health::quarantined_buffers`), and after a drain nothing is
//!   quarantined;
//! - **in flight**: `Health::in_flight` is the model's; nothing poisons;
//! - **slots**: a forgotten run's slot is refused until a drain, and a
//!   drain retires exactly the forgotten runs nobody waited for;
//! - at the end, with the device dropped: no allocation, stream or event
//!   left.
//!
//! **Pipeline** (`pipeline_*`): random `submit_work` / `complete_work` /
//! drain sequences of workloads with owned host tensors (random sizes: some
//! do not fit the staging region) and one shared device buffer that runs
//! write and read in stream order, at depth 2, 3 and 4, with kernel faults
//! and run errors injected. Checked: tags and values against the model,
//! results in submission order, every workload back exactly once with its
//! own tensors (refused: at once, with the right error; failed: inside the
//! error, nothing copied back), and after a drain the pipeline goes on.
//!
//! The negative controls at the end break the model or the harness on
//! purpose and require each checker to catch it.
//!
//! Cases: `PROPTEST_CASES` (CI: 256). A long soak:
//! `PROPTEST_CASES=20000 cargo test --release --test proptest_workload`.

mod common;

use std::collections::BTreeSet;

use common::checks;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use runclaim::contract::{Bound, Depth, DeviceBuffer, ErrorKind, Slot, SlotOf, SupportedDepth};
use runclaim::driver::Driver;
use runclaim::driver::abi::{Dir, Program};
use runclaim::sim::{SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Launched, Run, Runner, Workload};

/// Device buffers in the pool.
const POOL: usize = 3;
/// Elements of a buffer or a host tensor, at most.
const MAX_LEN: usize = 4;
/// Programs the callables run (`p0`, `p1`, `p2`).
const PROGRAMS: usize = 3;

/// The programs: none has a fixed point (`x + 1`, `3x + 1`, `5x + 7`), so
/// a run that did not happen, or happened twice, always shows.
fn program(p: usize) -> Program {
    match p % PROGRAMS {
        0 => Program::new().add(1),
        1 => Program::new().mul(3).add(1),
        _ => Program::new().mul(5).add(7),
    }
}

/// The simulator of every case: 2 ms watchdog, room for every program.
fn sim_config(seed: u64) -> SimConfig {
    SimConfig::default()
        .watchdog(std::time::Duration::from_millis(2))
        .seed(seed)
}

fn callables() -> Vec<Callable> {
    (0..PROGRAMS)
        .map(|p| Callable::program(format!("p{p}"), &program(p)))
        .collect()
}

// ----- typed runs: the operations -------------------------------------------------

/// Where a run reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Src {
    /// An owned host tensor.
    Host(Vec<u32>),
    /// The `.0`-th live buffer of the pool (modulo how many are live).
    Buf(usize),
}

/// Where a run writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dst {
    /// A borrowed host output, as long as the source (copied back at finalize).
    HostOut,
    /// The `.0`-th live buffer of the pool.
    Buf(usize),
}

/// How a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Fence and finalize.
    Finalize,
    /// `mem::forget` the launched run.
    Forget,
    /// Drop the launched run (its drop waits for its fence).
    Drop,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RunOp {
    /// The first free slot from this one on.
    slot: usize,
    program: usize,
    src: Src,
    dst: Dst,
    then: Then,
}

/// A step inside a batch of live runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum BOp {
    /// Prepare and launch a run (skipped when no slot is free).
    Launch(RunOp),
    /// End the `.0`-th live run (modulo how many are live) as its `then` says.
    Retire(usize),
}

/// One step of a typed case. Buffer indices are pool places (modulo the pool).
#[derive(Debug, Clone, PartialEq, Eq)]
enum TOp {
    /// Host write of the values (as many as fit) from element 0.
    Write(usize, Vec<u32>),
    /// Host read of the whole buffer.
    Read(usize),
    /// Runs launched and kept alive together; those still live at the end
    /// are retired in launch order, or in reverse (`.1`).
    Batch(Vec<BOp>, bool),
    /// Drop the buffer at this place.
    DropBuffer(usize),
    /// Allocate a buffer of `.1` elements at place `.0` (dropping the one there).
    Alloc(usize, usize),
    /// The host fills the `.0`-th host output so far (modulo) with `.1`.
    Scribble(usize, u32),
    /// `Runner::drain`.
    Drain,
}

/// A deliberate breakage of the model or the harness, for the negative
/// controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    None,
    /// The model applies a run when it is retired, not when it is launched:
    /// it ignores stream order.
    RetireOrder,
    /// Host reads go straight to the device memory, without waiting for a
    /// forgotten run that bound the buffer.
    ReadWithoutWait,
    /// A finalize also copies back the host outputs of earlier runs that
    /// were forgotten or dropped (the reference runtime's runner-wide
    /// copy-back records).
    StaleCopyBack,
    /// A dropped buffer's memory is freed at once, even while a forgotten
    /// run that bound it may still run.
    FreeAtDrop,
}

// ----- typed runs: the real side ---------------------------------------------------

/// A launched typed run of any slot, boxed so runs of different slots share
/// a `Vec`.
trait Live {
    /// Fences and finalizes it (copying its host outputs back); the token
    /// goes back.
    fn finalize(self: Box<Self>) -> Result<(), String>;
    /// `mem::forget`s it.
    fn forget(self: Box<Self>);
}

impl<const I: usize> Live for Run<'_, Launched, I, Bound<'_, '_>> {
    fn finalize(self: Box<Self>) -> Result<(), String> {
        let fenced = (*self)
            .fence()
            .map_err(|e| format!("fence: {}", e.kind()))?;
        let done = fenced
            .finalize()
            .map_err(|e| format!("finalize: {}", e.kind()))?;
        drop(done);
        Ok(())
    }

    fn forget(self: Box<Self>) {
        std::mem::forget(*self);
    }
}

fn launch_in<'r, 'w, 'a, Dr: Driver, const I: usize, const D: usize>(
    runner: &'r Runner<'_, Dr, D>,
    work: &'w mut Workload<'a>,
) -> Result<Box<dyn Live + 'w>, String>
where
    Slot<I>: SlotOf<D>,
    'r: 'w,
{
    let token = runner
        .take_slot::<I>()
        .map_err(|e| format!("take slot {I}: {}", e.kind()))?;
    let run = runner
        .prepare(token, work)
        .map_err(|e| format!("prepare in slot {I}: {}", e.kind()))?;
    let run = run
        .launch()
        .map_err(|e| format!("launch in slot {I}: {}", e.kind()))?;
    Ok(Box::new(run))
}

fn take_in<Dr: Driver, const I: usize, const D: usize>(
    runner: &Runner<'_, Dr, D>,
) -> Result<(), ErrorKind>
where
    Slot<I>: SlotOf<D>,
{
    runner
        .take_slot::<I>()
        .map(drop)
        .map_err(|e| e.kind().clone())
}

/// Typed slot access for a depth-`D` runner, by slot index.
trait Slots<const D: usize> {
    fn launch<'r, 'w, 'a, Dr: Driver>(
        runner: &'r Runner<'_, Dr, D>,
        slot: usize,
        work: &'w mut Workload<'a>,
    ) -> Result<Box<dyn Live + 'w>, String>
    where
        'r: 'w;
    /// Takes slot `slot`'s token and gives it back.
    fn take<Dr: Driver>(runner: &Runner<'_, Dr, D>, slot: usize) -> Result<(), ErrorKind>;
}

struct Typed;

macro_rules! slots {
    ($d:literal: $($i:literal),*) => {
        impl Slots<$d> for Typed {
            fn launch<'r, 'w, 'a, Dr: Driver>(
                runner: &'r Runner<'_, Dr, $d>,
                slot: usize,
                work: &'w mut Workload<'a>,
            ) -> Result<Box<dyn Live + 'w>, String>
            where
                'r: 'w,
            {
                match slot {
                    $($i => launch_in::<Dr, $i, $d>(runner, work),)*
                    _ => unreachable!("slot {slot} of depth {}", $d),
                }
            }

            fn take<Dr: Driver>(runner: &Runner<'_, Dr, $d>, slot: usize) -> Result<(), ErrorKind> {
                match slot {
                    $($i => take_in::<Dr, $i, $d>(runner),)*
                    _ => unreachable!("slot {slot} of depth {}", $d),
                }
            }
        }
    };
}

slots!(2: 0, 1);
slots!(3: 0, 1, 2);
slots!(4: 0, 1, 2, 3);

// ----- typed runs: the model -------------------------------------------------------

/// A buffer as the model knows it.
#[derive(Debug, Clone)]
struct MBuf {
    /// `None`: not written since allocation (unspecified).
    vals: Vec<Option<u32>>,
    /// The latest launched run that bound it (model run id).
    last: Option<usize>,
}

/// A run of a batch, resolved against the pool.
#[derive(Debug, Clone)]
struct Plan {
    program: usize,
    src: PSrc,
    dst: PDst,
    then: Then,
}

#[derive(Debug, Clone)]
enum PSrc {
    Host(Vec<u32>),
    Buf(usize),
}

#[derive(Debug, Clone, Copy)]
enum PDst {
    /// Index into the host outputs.
    Host(usize),
    Buf(usize),
}

#[derive(Debug)]
struct TModel {
    flaw: Flaw,
    bufs: Vec<Option<MBuf>>,
    /// Runs the contract counts in flight: launched, not proven complete.
    in_flight: BTreeSet<usize>,
    /// Dropped buffers not yet freed: the latest run that bound each.
    released: Vec<Option<usize>>,
    /// Slots held by forgotten runs, until a drain.
    forgotten_slots: BTreeSet<usize>,
    /// What each host output holds.
    outs: Vec<Vec<Option<u32>>>,
    /// Allocations of the device itself.
    base: u64,
    next_run: usize,
    /// Results of launched runs whose effect is deferred (the
    /// `RetireOrder` flaw only).
    deferred: Vec<(usize, Plan)>,
    /// Host results of launched runs, applied at finalize.
    results: Vec<(usize, Vec<Option<u32>>)>,
}

/// What a typed case did, for the "the cases do real work" check.
#[derive(Debug, Default, Clone, Copy)]
struct TReport {
    launched: usize,
    finalized: usize,
    forgotten: usize,
    dropped: usize,
    /// Host reads compared with the model.
    reads: usize,
    /// Host accesses that had to wait for a forgotten run.
    waited: usize,
    /// Buffer drops that had to quarantine the memory.
    quarantined: usize,
    /// Host outputs of forgotten or dropped runs checked after a later
    /// finalize.
    unwritten_checked: usize,
}

impl TModel {
    fn live_buffers(&self) -> usize {
        self.bufs.iter().flatten().count()
    }

    /// Applies run `plan`: reads its source, writes its destination.
    fn apply(&mut self, plan: &Plan, run: usize) {
        let f = program(plan.program);
        let src: Vec<Option<u32>> = match &plan.src {
            PSrc::Host(v) => v.iter().copied().map(Some).collect(),
            PSrc::Buf(k) => self.bufs[*k].as_ref().expect("a live buffer").vals.clone(),
        };
        let res: Vec<Option<u32>> = src.iter().map(|x| x.map(|x| f.apply_lossy(x))).collect();
        match plan.dst {
            PDst::Buf(k) => {
                let b = self.bufs[k].as_mut().expect("a live buffer");
                let m = res.len().min(b.vals.len());
                b.vals[..m].copy_from_slice(&res[..m]);
            }
            PDst::Host(_) => self.results.push((run, res)),
        }
    }

    /// Run `plan` was launched: it joins the in-flight runs and is the
    /// latest binder of its buffers; its effect happens now, in launch
    /// order (or, with the `RetireOrder` flaw, when it is retired).
    fn launch(&mut self, plan: &Plan) -> usize {
        let run = self.next_run;
        self.next_run += 1;
        self.in_flight.insert(run);
        for k in [
            match plan.src {
                PSrc::Buf(k) => Some(k),
                PSrc::Host(_) => None,
            },
            match plan.dst {
                PDst::Buf(k) => Some(k),
                PDst::Host(_) => None,
            },
        ]
        .into_iter()
        .flatten()
        {
            self.bufs[k].as_mut().expect("a live buffer").last = Some(run);
        }
        if self.flaw == Flaw::RetireOrder {
            self.deferred.push((run, plan.clone()));
        } else {
            self.apply(plan, run);
        }
        run
    }

    fn retire(&mut self, run: usize, plan: &Plan, slot: usize) {
        if let Some(at) = self.deferred.iter().position(|(r, _)| *r == run) {
            let (_, p) = self.deferred.remove(at);
            self.apply(&p, run);
        }
        let result = self
            .results
            .iter()
            .position(|(r, _)| *r == run)
            .map(|at| self.results.remove(at).1);
        match plan.then {
            Then::Finalize => {
                self.in_flight.remove(&run);
                if let (PDst::Host(o), Some(res)) = (plan.dst, result) {
                    self.outs[o] = res;
                }
            }
            Then::Drop => {
                self.in_flight.remove(&run);
            }
            Then::Forget => {
                self.forgotten_slots.insert(slot);
            }
        }
    }

    /// A host access of buffer `k`: it waits for the latest run that bound
    /// it, if that one is still in flight (only a forgotten run can be).
    /// Whether it waited.
    fn host_access(&mut self, k: usize) -> bool {
        let last = self.bufs[k].as_ref().and_then(|b| b.last);
        last.is_some_and(|run| self.in_flight.remove(&run))
    }

    /// The buffer at place `k` is dropped. Whether its memory must be
    /// quarantined (a run in flight bound it).
    fn drop_buffer(&mut self, k: usize) -> bool {
        let b = self.bufs[k].take().expect("a live buffer");
        self.released.push(b.last);
        b.last.is_some_and(|r| self.in_flight.contains(&r))
    }

    /// Dropped buffers no run in flight bound are freed.
    fn reclaim(&mut self) {
        let in_flight = &self.in_flight;
        self.released
            .retain(|r| r.is_some_and(|r| in_flight.contains(&r)));
    }

    fn allocations(&self) -> u64 {
        self.base + (self.live_buffers() + self.released.len()) as u64
    }
}

fn known_eq(what: &str, model: &[Option<u32>], got: &[u32]) -> Result<(), String> {
    let ok = model.len() == got.len()
        && model
            .iter()
            .zip(got)
            .all(|(m, g)| m.is_none_or(|m| m == *g));
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, model {model:?}"))
    }
}

/// The checks after every step.
fn check_device<Dr: Driver, const D: usize>(
    runner: &Runner<'_, Dr, D>,
    sim: &SimDriver,
    model: &TModel,
) -> Result<(), String> {
    let stats = sim.stats();
    let want = model.allocations();
    if stats.live_allocations() != want {
        return Err(format!(
            "live allocations: {} on the device, model {want} ({} of the device, {} live \
             buffers, {} dropped and not yet freed)",
            stats.live_allocations(),
            model.base,
            model.live_buffers(),
            model.released.len()
        ));
    }
    let h = runner.health();
    if h.quarantined_buffers != model.released.len() {
        return Err(format!(
            "quarantined: {} buffers, model {}",
            h.quarantined_buffers,
            model.released.len()
        ));
    }
    if h.in_flight != model.in_flight.len() || h.poisoned.is_some() {
        return Err(format!(
            "in flight: health {h:?}, model {} in flight, not poisoned",
            model.in_flight.len()
        ));
    }
    if stats.kernel_faults != 0 {
        return Err(format!("{} kernel fault(s)", stats.kernel_faults));
    }
    checks::no_stale_code(&stats)?;
    checks::no_busy_destroy(&stats)
}

fn check_outs(host: &[Vec<u32>], model: &TModel) -> Result<(), String> {
    for (i, (got, want)) in host.iter().zip(&model.outs).enumerate() {
        known_eq(&format!("host output {i}"), want, got)?;
    }
    Ok(())
}

/// The first free slot from `hint` on, if any.
fn free_slot(d: usize, hint: usize, busy: &BTreeSet<usize>) -> Option<usize> {
    (0..d).map(|k| (hint + k) % d).find(|s| !busy.contains(s))
}

/// Runs a typed case at depth `D`, with an optional flaw.
#[allow(
    clippy::too_many_lines,
    reason = "one interpreter: the borrow structure of a batch reads best in one place"
)]
fn typed_case<const D: usize>(
    init: &[Vec<u32>],
    ops: &[TOp],
    seed: u64,
    flaw: Flaw,
) -> Result<TReport, String>
where
    Depth<D>: SupportedDepth,
    Typed: Slots<D>,
{
    let sim = SimDriver::stepped(sim_config(seed));
    let mut dev = Device::<_, D>::open(sim.clone(), DeviceConfig::default())
        .map_err(|e| format!("open: {e}"))?;
    let mut runner = dev
        .publish(&callables())
        .map_err(|e| format!("publish: {e}"))?;
    let mut model = TModel {
        flaw,
        bufs: vec![None; POOL],
        in_flight: BTreeSet::new(),
        released: Vec::new(),
        forgotten_slots: BTreeSet::new(),
        outs: Vec::new(),
        base: sim.stats().live_allocations(),
        next_run: 0,
        deferred: Vec::new(),
        results: Vec::new(),
    };
    let mut report = TReport::default();
    let mut pool: Vec<Option<DeviceBuffer<u32>>> = (0..POOL).map(|_| None).collect();
    let mut host_outs: Vec<Vec<u32>> = Vec::new();
    for (k, vals) in init.iter().enumerate().take(POOL) {
        let mut b = runner
            .device()
            .alloc_buffer::<u32>(vals.len())
            .map_err(|e| format!("alloc: {e}"))?;
        runner
            .device()
            .write_buffer(&mut b, 0, vals)
            .map_err(|e| format!("write: {e}"))?;
        pool[k] = Some(b);
        model.bufs[k] = Some(MBuf {
            vals: vals.iter().copied().map(Some).collect(),
            last: None,
        });
    }
    check_device(&runner, &sim, &model).map_err(|e| format!("set-up: {e}"))?;
    for (step, op) in ops.iter().enumerate() {
        let at = |e: String| format!("step {step} ({op:?}): {e}");
        match op {
            TOp::Write(k, vals) => {
                let k = k % POOL;
                if let Some(buf) = pool[k].as_mut() {
                    let n = vals.len().min(buf.len());
                    runner
                        .device()
                        .write_buffer(buf, 0, &vals[..n])
                        .map_err(|e| at(format!("write: {e}")))?;
                    report.waited += usize::from(model.host_access(k));
                    let b = model.bufs[k].as_mut().expect("live");
                    for (m, v) in b.vals.iter_mut().zip(&vals[..n]) {
                        *m = Some(*v);
                    }
                }
            }
            TOp::Read(k) => {
                let k = k % POOL;
                if let Some(buf) = pool[k].as_mut() {
                    let mut got = vec![0u32; buf.len()];
                    if flaw == Flaw::ReadWithoutWait {
                        runner
                            .device()
                            .driver()
                            .copy_from_device(bytemuck::cast_slice_mut(&mut got), buf.addr())
                            .map_err(|e| at(format!("raw read: {e}")))?;
                    } else {
                        runner
                            .device()
                            .read_buffer(buf, 0, &mut got)
                            .map_err(|e| at(format!("read: {e}")))?;
                    }
                    report.waited += usize::from(model.host_access(k));
                    let want = &model.bufs[k].as_ref().expect("live").vals;
                    known_eq(&format!("read of buffer {k}"), want, &got).map_err(at)?;
                    report.reads += 1;
                }
            }
            TOp::DropBuffer(k) => {
                let k = k % POOL;
                if let Some(buf) = pool[k].take() {
                    let quarantine = model.drop_buffer(k);
                    if quarantine && flaw == Flaw::FreeAtDrop {
                        let _ = runner.device().driver().free(buf.addr());
                    }
                    report.quarantined += usize::from(quarantine);
                    drop(buf);
                }
            }
            TOp::Alloc(k, len) => {
                let k = k % POOL;
                if let Some(buf) = pool[k].take() {
                    let quarantine = model.drop_buffer(k);
                    if quarantine && flaw == Flaw::FreeAtDrop {
                        let _ = runner.device().driver().free(buf.addr());
                    }
                    report.quarantined += usize::from(quarantine);
                    drop(buf);
                }
                let len = (*len).clamp(1, MAX_LEN);
                let buf = runner
                    .device()
                    .alloc_buffer::<u32>(len)
                    .map_err(|e| at(format!("alloc: {e}")))?;
                model.reclaim();
                pool[k] = Some(buf);
                model.bufs[k] = Some(MBuf {
                    vals: vec![None; len],
                    last: None,
                });
            }
            TOp::Scribble(o, v) => {
                if !host_outs.is_empty() {
                    let o = o % host_outs.len();
                    host_outs[o].fill(*v);
                    model.outs[o].fill(Some(*v));
                }
            }
            TOp::Drain => {
                for &s in &model.forgotten_slots {
                    if let Ok(()) = Typed::take(&runner, s) {
                        return Err(at(format!(
                            "slots: slot {s}, held by a forgotten run, was handed out"
                        )));
                    }
                }
                let r = runner.drain().map_err(|e| at(format!("drain: {e}")))?;
                if r.retired != model.in_flight.len() {
                    return Err(at(format!(
                        "slots: the drain retired {} runs, model {} forgotten and not waited for",
                        r.retired,
                        model.in_flight.len()
                    )));
                }
                model.in_flight.clear();
                model.forgotten_slots.clear();
                model.reclaim();
                if runner.health().quarantined_buffers != 0 {
                    return Err(at(format!(
                        "quarantined: {} buffers after a drain",
                        runner.health().quarantined_buffers
                    )));
                }
            }
            TOp::Batch(bops, reverse) => {
                batch::<D>(
                    &runner,
                    &sim,
                    &pool,
                    &mut host_outs,
                    &mut model,
                    &mut report,
                    bops,
                    *reverse,
                )
                .map_err(at)?;
            }
        }
        check_device(&runner, &sim, &model).map_err(at)?;
        check_outs(&host_outs, &model).map_err(at)?;
    }
    // The end: a drain proves the queue quiet and frees what was dropped.
    runner.drain().map_err(|e| format!("final drain: {e}"))?;
    model.in_flight.clear();
    model.reclaim();
    check_device(&runner, &sim, &model).map_err(|e| format!("final drain: {e}"))?;
    if runner.health().quarantined_buffers != 0 {
        return Err("quarantined: buffers left after the final drain".into());
    }
    drop(pool);
    drop(runner);
    drop(dev);
    let stats = sim.stats();
    if stats.live_allocations() != 0 {
        return Err(format!(
            "live allocations: {} after the device dropped",
            stats.live_allocations()
        ));
    }
    checks::no_leaks(&stats)?;
    Ok(report)
}

/// One batch: the runs' workloads borrow the pool and the batch's host
/// outputs, the launched runs borrow the workloads; everything ends here.
#[allow(
    clippy::too_many_arguments,
    clippy::too_many_lines,
    reason = "the case's state, borrowed apart; one batch's borrows read best in one place"
)]
fn batch<const D: usize>(
    runner: &Runner<'_, SimDriver, D>,
    sim: &SimDriver,
    pool: &[Option<DeviceBuffer<u32>>],
    host_outs: &mut Vec<Vec<u32>>,
    model: &mut TModel,
    report: &mut TReport,
    bops: &[BOp],
    reverse: bool,
) -> Result<(), String>
where
    Depth<D>: SupportedDepth,
    Typed: Slots<D>,
{
    let live_bufs: Vec<usize> = (0..POOL).filter(|&k| pool[k].is_some()).collect();
    let pick = |i: usize| (!live_bufs.is_empty()).then(|| live_bufs[i % live_bufs.len()]);
    // Resolve every launch against the pool (fixed during a batch).
    let first_out = host_outs.len();
    let mut plans: Vec<Option<(Plan, usize)>> = Vec::new();
    for bop in bops {
        let BOp::Launch(op) = bop else { continue };
        let src = match &op.src {
            Src::Host(v) => Some(PSrc::Host(v.clone())),
            Src::Buf(i) => pick(*i).map(PSrc::Buf),
        };
        let dst = match op.dst {
            Dst::HostOut => Some(None),
            Dst::Buf(i) => pick(i).map(|k| Some(PDst::Buf(k))),
        };
        let (Some(src), Some(dst)) = (src, dst) else {
            plans.push(None);
            continue;
        };
        let dst = dst.unwrap_or_else(|| {
            let len = match &src {
                PSrc::Host(v) => v.len(),
                PSrc::Buf(k) => pool[*k].as_ref().map_or(0, DeviceBuffer::len),
            };
            // The host puts a marker there first: it must survive a run
            // that is never finalized.
            let marker = 0xF000_0000 | u32::try_from(host_outs.len()).unwrap_or(0);
            host_outs.push(vec![marker; len]);
            model.outs.push(vec![Some(marker); len]);
            PDst::Host(host_outs.len() - 1)
        });
        let plan = Plan {
            program: op.program % PROGRAMS,
            src,
            dst,
            then: op.then,
        };
        plans.push(Some((plan, op.slot)));
    }
    // Retired runs, in order: (model run, plan, slot).
    let mut retired: Vec<(usize, Plan)> = Vec::new();
    {
        let codes: Vec<_> = (0..PROGRAMS)
            .map(|p| runner.code(&format!("p{p}")))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("code: {e}"))?;
        let mut outs = host_outs[first_out..].iter_mut();
        let mut works: Vec<Option<Workload<'_>>> = plans
            .iter()
            .map(|p| {
                let (plan, _) = p.as_ref()?;
                let mut w = Workload::new(codes[plan.program]);
                w = match &plan.src {
                    PSrc::Host(v) => w.owned(v.clone(), Dir::In),
                    PSrc::Buf(k) => w.buffer(pool[*k].as_ref()?, Dir::In),
                };
                w = match plan.dst {
                    PDst::Host(_) => w.output(outs.next()?.as_mut_slice()),
                    PDst::Buf(k) => w.buffer(pool[k].as_ref()?, Dir::Out),
                };
                Some(w)
            })
            .collect();
        let mut works = works.iter_mut().zip(&plans);
        // Live runs: (model run, plan, slot, the run).
        let mut live: Vec<LiveRun<'_>> = Vec::new();
        let mut busy: BTreeSet<usize> = model.forgotten_slots.clone();
        for bop in bops {
            match bop {
                BOp::Launch(_) => {
                    let Some((work, plan)) = works.next() else {
                        unreachable!("one workload per launch");
                    };
                    let (Some(work), Some((plan, hint))) = (work.as_mut(), plan) else {
                        continue;
                    };
                    let Some(slot) = free_slot(D, *hint, &busy) else {
                        continue;
                    };
                    let handle = Typed::launch(runner, slot, work)?;
                    busy.insert(slot);
                    let run = model.launch(plan);
                    report.launched += 1;
                    live.push((run, plan.clone(), slot, handle));
                }
                BOp::Retire(i) => {
                    if !live.is_empty() {
                        let at = i % live.len();
                        retire_one(&mut live, at, model, &mut busy, report, &mut retired)?;
                    }
                }
            }
            check_device(runner, sim, model)?;
        }
        while !live.is_empty() {
            let at = if reverse { live.len() - 1 } else { 0 };
            retire_one(&mut live, at, model, &mut busy, report, &mut retired)?;
            check_device(runner, sim, model)?;
        }
    }
    // Host outputs of runs never finalized, with a finalize after them.
    let mut finalized_after = false;
    for (_, plan) in retired.iter().rev() {
        match (plan.then, plan.dst) {
            (Then::Finalize, _) => finalized_after = true,
            (_, PDst::Host(o)) if finalized_after => {
                report.unwritten_checked += 1;
                if model.flaw == Flaw::StaleCopyBack
                    && let PSrc::Host(v) = &plan.src
                {
                    // What a runner-wide copy-back list would write: the
                    // run's result, flushed by the later finalize.
                    let f = program(plan.program);
                    for (h, x) in host_outs[o].iter_mut().zip(v) {
                        *h = f.apply_lossy(*x);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A live run: (model run, plan, slot, the run).
type LiveRun<'w> = (usize, Plan, usize, Box<dyn Live + 'w>);

/// Ends live run `at` as its plan says.
fn retire_one(
    live: &mut Vec<LiveRun<'_>>,
    at: usize,
    model: &mut TModel,
    busy: &mut BTreeSet<usize>,
    report: &mut TReport,
    retired: &mut Vec<(usize, Plan)>,
) -> Result<(), String> {
    let (run, plan, slot, handle) = live.remove(at);
    match plan.then {
        Then::Finalize => {
            handle.finalize()?;
            busy.remove(&slot);
            report.finalized += 1;
        }
        Then::Drop => {
            drop(handle);
            busy.remove(&slot);
            report.dropped += 1;
        }
        Then::Forget => {
            handle.forget();
            report.forgotten += 1;
        }
    }
    model.retire(run, &plan, slot);
    retired.push((run, plan));
    Ok(())
}

// ----- typed runs: the strategies and properties -----------------------------------

fn values() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(any::<u32>(), 1..=MAX_LEN)
}

fn run_op() -> impl Strategy<Value = RunOp> {
    let src = prop_oneof![
        1 => values().prop_map(Src::Host),
        1 => (0..POOL).prop_map(Src::Buf),
    ];
    let dst = prop_oneof![
        1 => Just(Dst::HostOut),
        2 => (0..POOL).prop_map(Dst::Buf),
    ];
    let then = prop_oneof![
        4 => Just(Then::Finalize),
        1 => Just(Then::Forget),
        1 => Just(Then::Drop),
    ];
    (0..4usize, 0..PROGRAMS, src, dst, then).prop_map(|(slot, program, src, dst, then)| RunOp {
        slot,
        program,
        src,
        dst,
        then,
    })
}

fn bop() -> impl Strategy<Value = BOp> {
    prop_oneof![
        3 => run_op().prop_map(BOp::Launch),
        1 => (0..4usize).prop_map(BOp::Retire),
    ]
}

fn top() -> impl Strategy<Value = TOp> {
    prop_oneof![
        3 => ((0..POOL), values()).prop_map(|(k, v)| TOp::Write(k, v)),
        3 => (0..POOL).prop_map(TOp::Read),
        5 => (prop::collection::vec(bop(), 1..8), any::<bool>())
            .prop_map(|(b, r)| TOp::Batch(b, r)),
        1 => (0..POOL).prop_map(TOp::DropBuffer),
        1 => ((0..POOL), 1..=MAX_LEN).prop_map(|(k, n)| TOp::Alloc(k, n)),
        1 => (any::<usize>(), any::<u32>()).prop_map(|(o, v)| TOp::Scribble(o, v)),
        1 => Just(TOp::Drain),
    ]
}

/// The initial pool and the operations.
fn typed_ops() -> impl Strategy<Value = (Vec<Vec<u32>>, Vec<TOp>)> {
    (
        prop::collection::vec(values(), POOL),
        prop::collection::vec(top(), 5..30),
    )
}

proptest! {
    // Failing cases are kept in proptest-regressions/ (committed) and
    // replayed first on every run.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/proptest_workload.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn typed_depth2_buffers_match_the_model((init, ops) in typed_ops(), seed in any::<u64>()) {
        typed_case::<2>(&init, &ops, seed, Flaw::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn typed_depth3_buffers_match_the_model((init, ops) in typed_ops(), seed in any::<u64>()) {
        typed_case::<3>(&init, &ops, seed, Flaw::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn typed_depth4_buffers_match_the_model((init, ops) in typed_ops(), seed in any::<u64>()) {
        typed_case::<4>(&init, &ops, seed, Flaw::None).map_err(TestCaseError::fail)?;
    }
}

/// The generated typed cases exercise what they claim to: measured over 200
/// cases, runs are launched and finalized, forgotten and dropped; host reads
/// wait for forgotten runs; dropped buffers are quarantined; host outputs of
/// runs never finalized are checked after later finalizes. A property whose
/// cases mostly skip would prove nothing.
#[test]
fn generated_typed_cases_do_real_work() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut sum = TReport::default();
    for seed in 0..200u64 {
        let (init, ops) = typed_ops().new_tree(&mut runner).unwrap().current();
        let r = typed_case::<3>(&init, &ops, seed, Flaw::None).unwrap();
        sum.launched += r.launched;
        sum.finalized += r.finalized;
        sum.forgotten += r.forgotten;
        sum.dropped += r.dropped;
        sum.reads += r.reads;
        sum.waited += r.waited;
        sum.quarantined += r.quarantined;
        sum.unwritten_checked += r.unwritten_checked;
    }
    println!("typed, 200 cases: {sum:?}");
    assert!(sum.launched >= 1000, "{sum:?}");
    assert!(sum.finalized >= 500, "{sum:?}");
    assert!(sum.forgotten >= 100 && sum.dropped >= 100, "{sum:?}");
    assert!(sum.reads >= 300, "{sum:?}");
    assert!(sum.waited >= 30, "{sum:?}");
    assert!(sum.quarantined >= 20, "{sum:?}");
    assert!(sum.unwritten_checked >= 30, "{sum:?}");
}

// ----- negative controls: typed runs -------------------------------------------------

/// `typed_case` without the flaw passes; with it, it fails with a message
/// containing `expect`.
fn typed_control(ops: &[TOp], flaw: Flaw, expect: &str) {
    let init = vec![vec![1, 2], vec![3, 4], vec![5, 6]];
    typed_case::<2>(&init, ops, 1, Flaw::None).expect("the passing twin");
    let err = typed_case::<2>(&init, ops, 1, flaw).expect_err("the flaw must be caught");
    assert!(err.contains(expect), "{flaw:?} caught, but as: {err}");
}

fn launch(src: Src, dst: Dst, then: Then) -> BOp {
    BOp::Launch(RunOp {
        slot: 0,
        program: 1,
        src,
        dst,
        then,
    })
}

#[test]
fn a_model_that_ignores_stream_order_is_caught_by_the_host_output_check() {
    // Run 0 writes buffer 0, run 1 reads it (queued behind run 0); run 1 is
    // retired first. In stream order run 1 reads run 0's result.
    let ops = vec![TOp::Batch(
        vec![
            launch(Src::Host(vec![10, 20]), Dst::Buf(0), Then::Finalize),
            launch(Src::Buf(0), Dst::HostOut, Then::Finalize),
        ],
        true,
    )];
    typed_control(&ops, Flaw::RetireOrder, "host output 0");
}

#[test]
fn a_read_that_does_not_wait_for_a_forgotten_run_is_caught_by_the_read_check() {
    let ops = vec![
        TOp::Batch(
            vec![launch(Src::Host(vec![41, 1]), Dst::Buf(0), Then::Forget)],
            false,
        ),
        TOp::Read(0),
    ];
    typed_control(&ops, Flaw::ReadWithoutWait, "read of buffer 0");
}

#[test]
fn a_stale_copy_back_into_a_forgotten_runs_output_is_caught() {
    // Run 0 is forgotten (its host output keeps the host's marker), run 1
    // is finalized after it.
    let ops = vec![TOp::Batch(
        vec![
            launch(Src::Host(vec![5]), Dst::HostOut, Then::Forget),
            launch(Src::Host(vec![6]), Dst::HostOut, Then::Finalize),
        ],
        false,
    )];
    typed_control(&ops, Flaw::StaleCopyBack, "host output 0");
}

#[test]
fn freeing_a_buffer_a_forgotten_run_bound_is_caught_by_the_allocation_check() {
    let ops = vec![
        TOp::Batch(
            vec![launch(Src::Host(vec![7, 8]), Dst::Buf(0), Then::Forget)],
            false,
        ),
        TOp::DropBuffer(0),
    ];
    typed_control(&ops, Flaw::FreeAtDrop, "live allocations");
}
