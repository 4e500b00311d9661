//! Device buffers and host tensors under any sequence of use: random
//! binds, host reads and writes, forgotten and dropped runs, buffer drops
//! and allocations, checked against a small sequential model.
//!
//! **Typed runs** (`typed_*`): a pool of `u32` device buffers (a few
//! elements each) on a stepped simulator at depth 2, 3 and 4. Operations
//! come in phases: host phases (write, read, drop a buffer, allocate one,
//! scribble on a host output, drain) and batches of typed runs, launched
//! and kept alive together — several queued before any is fenced, sharing
//! buffers (whole, or slices of them) in stream order — then each
//! finalized, forgotten or dropped, in a generated order (or prepared only,
//! and dropped or forgotten unlaunched). A case ends with a drain, or by
//! dropping its buffers and the device undrained. (The borrow checker
//! forces the phases: a live run borrows the pool; what forgetting a run
//! leaves behind is what the run time must check.) The model computes every run in launch order and
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
//!   allocation or drain (`SimStats::live_allocations`), each counted as
//!   the model counts it (`Health::buffers_quarantined`: a run in flight
//!   not observed complete bound it; `Health::buffers_awaiting_free`: none
//!   did), and after a drain nothing is quarantined;
//! - **in flight**: `Health::in_flight` is the model's; nothing poisons;
//! - **slots**: a forgotten run's slot is refused until a drain, and a
//!   drain retires exactly the forgotten runs (a host access that waited
//!   for one only observed it complete: its slot stays its own);
//! - at the end, with the device dropped: no allocation, stream or event
//!   left.
//!
//! **Pipeline** (`pipeline_*`): random `submit` / `complete` /
//! drain sequences of workloads with owned host tensors (random sizes: some
//! do not fit the staging region) and one shared device buffer that runs
//! write and read in stream order, at depth 2, 3 and 4, with kernel faults
//! and run errors injected. Checked: tags and values against the model,
//! results in submission order, every workload back exactly once with its
//! own tensors (refused: at once, with the right error; failed: inside the
//! error, nothing copied back); a pipeline dropped mid-stream waits for its
//! runs, so a host read of the shared buffer afterwards sees what they
//! wrote; and after a drain the pipeline goes on.
//!
//! **Tensor ids** (`tensor_ids_*`): a workload of random owned `u32`,
//! owned `f32` and borrowed tensors (past the 16 inline ones too), built
//! with the id-returning builders: every id reads what its index reads,
//! another workload built alike refuses every id (`ForeignTensor`), and a
//! bare index probed with a type answers as a model says (`NoTensor`, then
//! the element type, then the kind).
//!
//! The negative controls at the end break the model or the harness on
//! purpose and require each checker to catch it.
//!
//! Every property and its real-work measure also run under the a2a3
//! kernel ABI (`a2a3_*`): the simulator speaking it, the device opened with
//! its adapter, the same sequences and the same model. (The negative
//! controls flaw the model or the harness, not the device: runclaim's ABI
//! only.)
//!
//! Cases: `PROPTEST_CASES` (CI: 256). A long soak:
//! `PROPTEST_CASES=20000 cargo test --release --test proptest_workload`.

mod common;

use std::collections::BTreeSet;

use common::abi::Abi;
use common::checks;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use runclaim::contract::{
    Depth, DeviceBuffer, ErrorKind, Slot, SlotOf, SupportedDepth, WithWorkload,
};
use runclaim::driver::Driver;
use runclaim::driver::abi::{Dir, Program};
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Launched, Pipeline, Run, Runner, Workload};

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
    /// A slice of it: from element `.1` (modulo its length), `.2 + 1`
    /// elements at most (clamped to its end).
    Part(usize, u8, u8),
}

/// Where a run writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dst {
    /// A borrowed host output, as long as the source (copied back at finalize).
    HostOut,
    /// The `.0`-th live buffer of the pool.
    Buf(usize),
    /// A slice of it, as for [`Src::Part`].
    Part(usize, u8, u8),
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
    /// Prepare it and drop it unlaunched.
    DropPrepared,
    /// Prepare it and `mem::forget` it unlaunched (its slot is lost until
    /// a drain; nothing of it reaches the device).
    ForgetPrepared,
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
    /// Host writes go straight to the device memory, without waiting for a
    /// forgotten run that reads the buffer.
    WriteWithoutWait,
    /// A finalize also copies back the host outputs of earlier runs that
    /// were forgotten or dropped (the reference runtime's runner-wide
    /// copy-back records).
    StaleCopyBack,
    /// A dropped buffer's memory is freed at once, even while a forgotten
    /// run that bound it may still run.
    FreeAtDrop,
    /// The model takes a forgotten run's slot for free once a host access
    /// waited for the run (only a drain gives it back).
    SlotBackAfterWait,
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

impl<const I: usize> Live for Run<'_, Launched, I, WithWorkload<'_, '_>> {
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

fn prepare_in<Dr: Driver, const I: usize, const D: usize>(
    runner: &Runner<'_, Dr, D>,
    work: &mut Workload<'_>,
    forget: bool,
) -> Result<(), String>
where
    Slot<I>: SlotOf<D>,
{
    let token = runner
        .take_slot::<I>()
        .map_err(|e| format!("take slot {I}: {}", e.kind()))?;
    let run = runner
        .prepare(token, work)
        .map_err(|e| format!("prepare in slot {I}: {}", e.kind()))?;
    if forget {
        std::mem::forget(run);
    } else {
        drop(run);
    }
    Ok(())
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
    /// Prepares a run of `work` in `slot`, then drops or forgets it.
    fn prepare_only<Dr: Driver>(
        runner: &Runner<'_, Dr, D>,
        slot: usize,
        work: &mut Workload<'_>,
        forget: bool,
    ) -> Result<(), String>;
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

            fn prepare_only<Dr: Driver>(
                runner: &Runner<'_, Dr, $d>,
                slot: usize,
                work: &mut Workload<'_>,
                forget: bool,
            ) -> Result<(), String> {
                match slot {
                    $($i => prepare_in::<Dr, $i, $d>(runner, work, forget),)*
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
    /// Pool place, elements `start..end`.
    Buf(usize, usize, usize),
}

#[derive(Debug, Clone, Copy)]
enum PDst {
    /// Index into the host outputs.
    Host(usize),
    /// Pool place, elements `start..end`.
    Buf(usize, usize, usize),
}

#[derive(Debug)]
struct TModel {
    flaw: Flaw,
    bufs: Vec<Option<MBuf>>,
    /// Runs the contract counts in flight: launched, not yet fenced by
    /// their handle or retired by a drain.
    in_flight: BTreeSet<usize>,
    /// Forgotten runs a host access observed complete: still counted in
    /// flight (their slot stays theirs until a drain), but they touch
    /// nothing any more.
    observed: BTreeSet<usize>,
    /// Dropped buffers not yet freed: the latest run that bound each.
    released: Vec<Option<usize>>,
    /// Slots held by forgotten runs, until a drain.
    forgotten_slots: BTreeSet<usize>,
    /// What each host output holds.
    outs: Vec<Vec<Option<u32>>>,
    /// Allocations of the device itself.
    base: u64,
    next_run: usize,
    /// The slot of each launched run, by model run id.
    run_slots: Vec<usize>,
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
    /// Runs prepared and dropped or forgotten unlaunched.
    abandoned: usize,
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
            PSrc::Buf(k, a, b) => {
                self.bufs[*k].as_ref().expect("a live buffer").vals[*a..*b].to_vec()
            }
        };
        let res: Vec<Option<u32>> = src.iter().map(|x| x.map(|x| f.apply_lossy(x))).collect();
        match plan.dst {
            PDst::Buf(k, start, end) => {
                let b = self.bufs[k].as_mut().expect("a live buffer");
                let m = res.len().min(end - start);
                b.vals[start..start + m].copy_from_slice(&res[..m]);
            }
            PDst::Host(_) => self.results.push((run, res)),
        }
    }

    /// Run `plan` was launched: it joins the in-flight runs and is the
    /// latest binder of its buffers; its effect happens now, in launch
    /// order (or, with the `RetireOrder` flaw, when it is retired).
    fn launch(&mut self, plan: &Plan, slot: usize) -> usize {
        let run = self.next_run;
        self.next_run += 1;
        self.run_slots.push(slot);
        self.in_flight.insert(run);
        for k in [
            match plan.src {
                PSrc::Buf(k, ..) => Some(k),
                PSrc::Host(_) => None,
            },
            match plan.dst {
                PDst::Buf(k, ..) => Some(k),
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
            Then::DropPrepared | Then::ForgetPrepared => unreachable!("never launched"),
        }
    }

    /// A host access of buffer `k`: it waits for the latest run that bound
    /// it, if that one is still in flight (only a forgotten run can be).
    /// Whether it waited.
    fn host_access(&mut self, k: usize) -> bool {
        let last = self.bufs[k].as_ref().and_then(|b| b.last);
        let waited = last.is_some_and(|run| {
            let waits = self.in_flight.contains(&run) && !self.observed.contains(&run);
            if waits {
                self.observe_through(run);
            }
            waits
        });
        if waited && self.flaw == Flaw::SlotBackAfterWait {
            let slot = self.run_slots[last.unwrap_or(0)];
            self.forgotten_slots.remove(&slot);
        }
        waited
    }

    /// The buffer at place `k` is dropped. Whether its memory must be
    /// quarantined (a run in flight bound it).
    fn drop_buffer(&mut self, k: usize) -> bool {
        let b = self.bufs[k].take().expect("a live buffer");
        self.released.push(b.last);
        b.last.is_some_and(|r| self.busy(r))
    }

    /// A host access saw run `run`'s fence complete: so was every run
    /// launched before it (stream order), and the library marks them all.
    fn observe_through(&mut self, run: usize) {
        let ahead: Vec<usize> = self.in_flight.range(..=run).copied().collect();
        self.observed.extend(ahead);
    }

    /// Whether run `r` may still touch memory: in flight, not observed.
    fn busy(&self, r: usize) -> bool {
        self.in_flight.contains(&r) && !self.observed.contains(&r)
    }

    /// Dropped buffers no run in flight bound are freed.
    fn reclaim(&mut self) {
        let (in_flight, observed) = (&self.in_flight, &self.observed);
        self.released
            .retain(|r| r.is_some_and(|r| in_flight.contains(&r) && !observed.contains(&r)));
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
    let quarantined = model
        .released
        .iter()
        .filter(|r| r.is_some_and(|r| model.busy(r)))
        .count();
    let awaiting_free = model.released.len() - quarantined;
    if (h.buffers_quarantined, h.buffers_awaiting_free) != (quarantined, awaiting_free) {
        return Err(format!(
            "quarantined: {} buffers quarantined and {} awaiting their free, model {quarantined} \
             and {awaiting_free}",
            h.buffers_quarantined, h.buffers_awaiting_free,
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
    typed_case_under::<D>(Abi::Runclaim, init, ops, seed, flaw)
}

/// [`typed_case`] with the simulator speaking `abi` and the device opened
/// with its adapter.
#[allow(
    clippy::too_many_lines,
    reason = "one interpreter: the borrow structure of a batch reads best in one place"
)]
fn typed_case_under<const D: usize>(
    abi: Abi,
    init: &[Vec<u32>],
    ops: &[TOp],
    seed: u64,
    flaw: Flaw,
) -> Result<TReport, String>
where
    Depth<D>: SupportedDepth,
    Typed: Slots<D>,
{
    let sim = abi.stepped(sim_config(seed));
    let mut dev =
        Device::<_, D>::open(sim.clone(), abi.config()).map_err(|e| format!("open: {e}"))?;
    let mut runner = dev
        .publish(&callables())
        .map_err(|e| format!("publish: {e}"))?;
    let mut model = TModel {
        flaw,
        bufs: vec![None; POOL],
        in_flight: BTreeSet::new(),
        observed: BTreeSet::new(),
        released: Vec::new(),
        forgotten_slots: BTreeSet::new(),
        outs: Vec::new(),
        base: sim.stats().live_allocations(),
        next_run: 0,
        run_slots: Vec::new(),
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
                    if flaw == Flaw::WriteWithoutWait {
                        runner
                            .device()
                            .driver()
                            .copy_to_device(buf.addr(), bytemuck::cast_slice(&vals[..n]))
                            .map_err(|e| at(format!("raw write: {e}")))?;
                    } else {
                        runner
                            .device()
                            .write_buffer(buf, 0, &vals[..n])
                            .map_err(|e| at(format!("write: {e}")))?;
                    }
                    // (The broken write does not wait: so the model
                    // agrees on what is in flight, and the values tell.)
                    if flaw != Flaw::WriteWithoutWait {
                        report.waited += usize::from(model.host_access(k));
                    }
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
                    if flaw != Flaw::ReadWithoutWait {
                        report.waited += usize::from(model.host_access(k));
                    }
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
                        "slots: the drain retired {} runs, model {} forgotten",
                        r.retired,
                        model.in_flight.len()
                    )));
                }
                model.in_flight.clear();
                model.observed.clear();
                model.forgotten_slots.clear();
                model.reclaim();
                let h = runner.health();
                if h.buffers_quarantined != 0 || h.buffers_awaiting_free != 0 {
                    return Err(at(format!(
                        "quarantined: {} buffers quarantined and {} awaiting their free after \
                         a drain",
                        h.buffers_quarantined, h.buffers_awaiting_free
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
    // The end, one of two ways: a drain proves the queue quiet and frees
    // what was dropped; or the buffers go first (quarantined while
    // forgotten runs that bound them are in flight) and the device's drop
    // must settle and free everything itself.
    if seed.is_multiple_of(2) {
        runner.drain().map_err(|e| format!("final drain: {e}"))?;
        model.in_flight.clear();
        model.observed.clear();
        model.reclaim();
        check_device(&runner, &sim, &model).map_err(|e| format!("final drain: {e}"))?;
        let h = runner.health();
        if h.buffers_quarantined != 0 || h.buffers_awaiting_free != 0 {
            return Err("quarantined: buffers left after the final drain".into());
        }
    } else {
        for (k, place) in pool.iter_mut().enumerate() {
            if let Some(buf) = place.take() {
                model.drop_buffer(k);
                drop(buf);
            }
        }
        check_device(&runner, &sim, &model).map_err(|e| format!("buffers dropped: {e}"))?;
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
    let len_of = |k: usize| pool[k].as_ref().map_or(0, DeviceBuffer::len);
    let pick = |i: usize| (!live_bufs.is_empty()).then(|| live_bufs[i % live_bufs.len()]);
    // A whole buffer, or a slice of it: (place, start, end).
    let whole = |i: usize| pick(i).map(|k| (k, 0, len_of(k)));
    let part = |i: usize, a: u8, n: u8| {
        pick(i).map(|k| {
            let start = usize::from(a) % len_of(k);
            (k, start, (start + 1 + usize::from(n)).min(len_of(k)))
        })
    };
    // Resolve every launch against the pool (fixed during a batch).
    let first_out = host_outs.len();
    let mut plans: Vec<Option<(Plan, usize)>> = Vec::new();
    for bop in bops {
        let BOp::Launch(op) = bop else { continue };
        let src = match &op.src {
            Src::Host(v) => Some(PSrc::Host(v.clone())),
            Src::Buf(i) => whole(*i).map(|(k, a, b)| PSrc::Buf(k, a, b)),
            Src::Part(i, a, n) => part(*i, *a, *n).map(|(k, a, b)| PSrc::Buf(k, a, b)),
        };
        let dst = match op.dst {
            Dst::HostOut => Some(None),
            Dst::Buf(i) => whole(i).map(|(k, a, b)| Some(PDst::Buf(k, a, b))),
            Dst::Part(i, a, n) => part(i, a, n).map(|(k, a, b)| Some(PDst::Buf(k, a, b))),
        };
        let (Some(src), Some(dst)) = (src, dst) else {
            plans.push(None);
            continue;
        };
        // Source and destination in one buffer: the same elements (in
        // place) or apart. Overlapping shifted ranges alias, and what an
        // elementwise kernel computes then is unspecified.
        if let (PSrc::Buf(k, a, b), Some(PDst::Buf(j, c, d))) = (&src, dst)
            && *k == j
            && *a != c
            && *a < d
            && c < *b
        {
            plans.push(None);
            continue;
        }
        let dst = dst.unwrap_or_else(|| {
            let len = match &src {
                PSrc::Host(v) => v.len(),
                PSrc::Buf(_, a, b) => b - a,
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
                match &plan.src {
                    PSrc::Host(v) => w.owned(v.clone(), Dir::In),
                    PSrc::Buf(k, a, b) => w.buffer(pool[*k].as_ref()?.slice(*a..*b), Dir::In),
                };
                match plan.dst {
                    PDst::Host(_) => w.output(outs.next()?.as_mut_slice()),
                    PDst::Buf(k, a, b) => w.buffer(pool[k].as_ref()?.slice(a..b), Dir::Out),
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
                    if let Then::DropPrepared | Then::ForgetPrepared = plan.then {
                        let forget = plan.then == Then::ForgetPrepared;
                        Typed::prepare_only(runner, slot, work, forget)?;
                        if forget {
                            busy.insert(slot);
                            model.forgotten_slots.insert(slot);
                        }
                        report.abandoned += 1;
                        retired.push((usize::MAX, plan.clone()));
                        check_device(runner, sim, model)?;
                        continue;
                    }
                    let handle = Typed::launch(runner, slot, work)?;
                    busy.insert(slot);
                    let run = model.launch(plan, slot);
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
        Then::DropPrepared | Then::ForgetPrepared => unreachable!("never launched"),
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
        2 => values().prop_map(Src::Host),
        1 => (0..POOL).prop_map(Src::Buf),
        1 => (0..POOL, 0..4u8, 0..4u8).prop_map(|(k, a, n)| Src::Part(k, a, n)),
    ];
    let dst = prop_oneof![
        1 => Just(Dst::HostOut),
        1 => (0..POOL).prop_map(Dst::Buf),
        1 => (0..POOL, 0..4u8, 0..4u8).prop_map(|(k, a, n)| Dst::Part(k, a, n)),
    ];
    let then = prop_oneof![
        4 => Just(Then::Finalize),
        1 => Just(Then::Forget),
        1 => Just(Then::Drop),
        1 => prop_oneof![Just(Then::DropPrepared), Just(Then::ForgetPrepared)],
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
        2 => (0..POOL).prop_map(TOp::DropBuffer),
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

    // The same properties under the a2a3 kernel ABI.

    #[test]
    fn a2a3_typed_depth2_buffers_match_the_model((init, ops) in typed_ops(), seed in any::<u64>()) {
        typed_case_under::<2>(Abi::A2a3, &init, &ops, seed, Flaw::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a2a3_typed_depth3_buffers_match_the_model((init, ops) in typed_ops(), seed in any::<u64>()) {
        typed_case_under::<3>(Abi::A2a3, &init, &ops, seed, Flaw::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a2a3_typed_depth4_buffers_match_the_model((init, ops) in typed_ops(), seed in any::<u64>()) {
        typed_case_under::<4>(Abi::A2a3, &init, &ops, seed, Flaw::None).map_err(TestCaseError::fail)?;
    }
}

/// The generated typed cases exercise what they claim to: measured over 200
/// cases, runs are launched and finalized, forgotten and dropped; host reads
/// wait for forgotten runs; dropped buffers are quarantined; host outputs of
/// runs never finalized are checked after later finalizes. A property whose
/// cases mostly skip would prove nothing.
#[test]
fn generated_typed_cases_do_real_work() {
    typed_cases_do_real_work(Abi::Runclaim);
}

/// The same measure under the a2a3 kernel ABI: its twins do as much.
#[test]
fn a2a3_generated_typed_cases_do_real_work() {
    typed_cases_do_real_work(Abi::A2a3);
}

fn typed_cases_do_real_work(abi: Abi) {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut sum = TReport::default();
    for seed in 0..200u64 {
        let (init, ops) = typed_ops().new_tree(&mut runner).unwrap().current();
        let r = typed_case_under::<3>(abi, &init, &ops, seed, Flaw::None).unwrap();
        sum.launched += r.launched;
        sum.finalized += r.finalized;
        sum.forgotten += r.forgotten;
        sum.dropped += r.dropped;
        sum.abandoned += r.abandoned;
        sum.reads += r.reads;
        sum.waited += r.waited;
        sum.quarantined += r.quarantined;
        sum.unwritten_checked += r.unwritten_checked;
    }
    println!("{}: typed, 200 cases: {sum:?}", abi.name());
    assert!(sum.launched >= 1000, "{sum:?}");
    assert!(sum.finalized >= 500, "{sum:?}");
    assert!(sum.forgotten >= 100 && sum.dropped >= 100, "{sum:?}");
    assert!(sum.abandoned >= 50, "{sum:?}");
    assert!(sum.reads >= 300, "{sum:?}");
    assert!(sum.waited >= 30, "{sum:?}");
    // A run seen complete (or any run after it) frees what it bound: few
    // drops find a run still unobserved (12 of 200 cases when written).
    assert!(sum.quarantined >= 8, "{sum:?}");
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

// ----- pipeline: operations, model, harness ------------------------------------------

/// Elements of the pipeline's shared device buffer.
const SHARED_LEN: usize = 8;
/// Bytes of each slot's staging region in the pipeline cases: two tensors
/// of up to 16 elements fit (each at a multiple of 64 bytes), larger ones
/// are refused.
const STAGING: usize = 128;

/// What a pipeline workload reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PKind {
    /// Owned host input → owned host output (as long).
    HostToHost,
    /// Owned host input → the shared buffer.
    HostToBuf,
    /// The shared buffer → owned host output.
    BufToHost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PFault {
    /// The `nth` kernel of this kind from now raises an exception.
    Kernel(Kernel, u64),
    /// The `nth` AICPU kernel from now reports run error 77.
    RunError(u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum POp {
    /// Submit a workload: its kind, its owned tensors' length, the first
    /// input value, its program.
    Submit(PKind, usize, u32, usize),
    /// `complete`.
    Complete,
    /// `Pipeline::drain`.
    Drain,
    /// Drop the pipeline with its pending runs (after a drain, once a
    /// fault was injected), read the shared buffer from the host, write
    /// it (values from `.0`) if given, and make a new pipeline.
    Restart(Option<u32>),
    Inject(PFault),
}

/// A deliberate breakage, for the negative controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PFlaw {
    None,
    /// The model reads the shared buffer as the host last saw it when the
    /// workload was submitted, ignoring the runs queued ahead of it.
    IgnoreQueued,
    /// The harness flips a bit of the first completed host output.
    Corrupt,
    /// The harness swallows the first completion.
    Lose,
    /// A failed run's workload comes back with its output written.
    CopyBackOnFailure,
    /// A refused workload is not handed back.
    KeepRefused,
    /// The model takes runs dropped with their pipeline for runs that never
    /// ran (a pipeline drop that abandoned its queue would behave so).
    DroppedNeverRan,
}

/// A submitted workload as the model knows it.
#[derive(Debug, Clone)]
struct Pending {
    tag: u64,
    kind: PKind,
    input: Vec<u32>,
    out_len: usize,
    program: usize,
    /// The shared buffer as the host last saw it at submission (the
    /// `IgnoreQueued` flaw reads this).
    seen: Vec<Option<u32>>,
    /// A drain fenced it: no longer in flight, its outcome kept.
    settled: bool,
}

/// What a pipeline case did.
#[derive(Debug, Default, Clone, Copy)]
struct PReport {
    submitted: usize,
    completed: usize,
    failed: usize,
    staging_full: usize,
    depth_full: usize,
    refused_after_fault: usize,
    drains: usize,
    /// Host reads of the shared buffer between pipelines.
    host_reads: usize,
    /// Completed runs that read the shared buffer a queued run wrote.
    chained: usize,
}

/// Tag `tag` came back (or went with its pipeline): never twice.
fn account(back: &mut BTreeSet<u64>, tag: u64) -> Result<(), String> {
    if back.insert(tag) {
        Ok(())
    } else {
        Err(format!("duplicated: tag {tag} came back twice"))
    }
}

/// The host output marker: what a workload's output holds before a run
/// writes it.
const MARK: u32 = 0xDEAD_0000;

/// Where the tensors sit in a workload of `kind`: (input, output), as
/// argument indices.
fn owned_places(kind: PKind) -> (Option<usize>, Option<usize>) {
    match kind {
        PKind::HostToHost => (Some(0), Some(1)),
        PKind::HostToBuf => (Some(0), None),
        PKind::BufToHost => (None, Some(1)),
    }
}

/// The host tensors of a workload of `kind` and length `len`, packed as the
/// staging region packs them: the index and size of the first that does
/// not fit, if any.
fn misfit(kind: PKind, len: usize) -> Option<(usize, usize)> {
    let bytes = 4 * len;
    let (i, o) = owned_places(kind);
    let mut used = 0usize;
    for at in [i, o].into_iter().flatten() {
        let start = used.next_multiple_of(DeviceConfig::STAGING_ALIGN);
        if start + bytes > STAGING {
            return Some((at, bytes));
        }
        used = start + bytes;
    }
    None
}

/// The workload `p` is, built over `shared`.
fn build<'r>(
    code: runclaim::CodeRef<'r>,
    shared: &'r DeviceBuffer<u32>,
    p: &Pending,
) -> Workload<'r> {
    let mut w = Workload::new(code);
    match p.kind {
        PKind::HostToHost => w
            .owned(p.input.clone(), Dir::In)
            .owned(vec![MARK; p.out_len], Dir::Out),
        PKind::HostToBuf => w.owned(p.input.clone(), Dir::In).buffer(shared, Dir::Out),
        PKind::BufToHost => w
            .buffer(shared, Dir::In)
            .owned(vec![MARK; p.out_len], Dir::Out),
    };
    w
}

/// Checks that a workload handed back (`what`) is `p`'s: its input as
/// submitted, its output `out` (`None`: the marker, nothing copied back).
fn check_handed_back(
    what: &str,
    work: Option<&Workload<'_>>,
    p: &Pending,
    out: Option<&[Option<u32>]>,
) -> Result<(), String> {
    let Some(work) = work else {
        return Err(format!(
            "handed back: {what} of tag {} came back without its workload",
            p.tag
        ));
    };
    let (i, o) = owned_places(p.kind);
    if let Some(i) = i
        && work.get::<u32>(i).ok() != Some(&p.input[..])
    {
        return Err(format!(
            "handed back: {what} of tag {}: input {:?}, submitted {:?}",
            p.tag,
            work.get::<u32>(i).ok(),
            p.input
        ));
    }
    if let Some(o) = o {
        let got = work.get::<u32>(o).ok().unwrap_or(&[]);
        let marker = vec![Some(MARK); p.out_len];
        let want = out.unwrap_or(&marker);
        known_eq(&format!("values: {what} of tag {}", p.tag), want, got)?;
    }
    Ok(())
}

fn pipeline_case<const D: usize>(ops: &[POp], seed: u64, flaw: PFlaw) -> Result<PReport, String>
where
    Depth<D>: SupportedDepth,
{
    pipeline_case_under::<D>(Abi::Runclaim, ops, seed, flaw)
}

/// [`pipeline_case`] with the simulator speaking `abi` and the device
/// opened with its adapter.
#[allow(
    clippy::too_many_lines,
    reason = "one interpreter: the case's borrows (buffer, runner, pipeline) read best in one place"
)]
fn pipeline_case_under<const D: usize>(
    abi: Abi,
    ops: &[POp],
    seed: u64,
    flaw: PFlaw,
) -> Result<PReport, String>
where
    Depth<D>: SupportedDepth,
{
    let sim = abi.stepped(sim_config(seed));
    let cfg = abi.with(DeviceConfig::default().staging_bytes(STAGING));
    let mut dev = Device::<_, D>::open(sim.clone(), cfg).map_err(|e| format!("open: {e}"))?;
    let mut shared = dev
        .alloc_buffer::<u32>(SHARED_LEN)
        .map_err(|e| format!("alloc: {e}"))?;
    let base = seed.to_le_bytes()[..4]
        .iter()
        .fold(0u32, |a, &b| (a << 8) | u32::from(b));
    let init: Vec<u32> = (0u32..)
        .take(SHARED_LEN)
        .map(|i| base.wrapping_mul(2_654_435_761).wrapping_add(i))
        .collect();
    dev.write_buffer(&mut shared, 0, &init)
        .map_err(|e| format!("write: {e}"))?;
    let mut model: Vec<Option<u32>> = init.iter().copied().map(Some).collect();
    let mut report = PReport::default();
    {
        let runner = dev
            .publish(&callables())
            .map_err(|e| format!("publish: {e}"))?;
        let codes: Vec<_> = (0..PROGRAMS)
            .map(|p| runner.code(&format!("p{p}")))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("code: {e}"))?;
        let mut pipe = Pipeline::<_, D, u64>::new(&runner).map_err(|e| format!("pipeline: {e}"))?;
        let mut pending: std::collections::VecDeque<Pending> = std::collections::VecDeque::new();
        let mut faulty = false;
        let mut next_tag = 0u64;
        let mut flaw_fired = false;
        // Every workload made, and every one handed back (by tag).
        let (mut made, mut back) = (0usize, BTreeSet::new());
        for (step, op) in ops.iter().enumerate() {
            let at = |e: String| format!("step {step} ({op:?}): {e}");
            match op.clone() {
                POp::Inject(f) => {
                    faulty = true;
                    sim.inject(match f {
                        PFault::Kernel(kernel, nth) => Fault::KernelFault { kernel, nth },
                        PFault::RunError(nth) => Fault::RunError { nth, code: 77 },
                    });
                }
                POp::Submit(kind, len, first, program) => {
                    let p = Pending {
                        tag: next_tag,
                        kind,
                        input: (0u32..).take(len).map(|i| first.wrapping_add(i)).collect(),
                        out_len: len,
                        program: program % PROGRAMS,
                        seen: model.clone(),
                        settled: false,
                    };
                    next_tag += 1;
                    made += 1;
                    let work = build(codes[p.program], &shared, &p);
                    match pipe.submit(work, p.tag) {
                        Ok(_) => {
                            if pending.len() >= D {
                                return Err(at("submitted past the depth".into()));
                            }
                            if let Some(m) = misfit(kind, len) {
                                return Err(at(format!(
                                    "submitted, but tensor {m:?} does not fit"
                                )));
                            }
                            report.submitted += 1;
                            pending.push_back(p);
                        }
                        Err(e) => {
                            let kind_e = e.kind().clone();
                            let r = e.into_value();
                            // The negative control: a pipeline that kept the refused workload.
                            let work = (flaw != PFlaw::KeepRefused).then_some(r.work);
                            if r.tag != p.tag {
                                return Err(at(format!(
                                    "handed back: tag {} for {}",
                                    r.tag, p.tag
                                )));
                            }
                            check_handed_back("a refused submit", work.as_ref(), &p, None)
                                .map_err(at)?;
                            account(&mut back, p.tag).map_err(at)?;
                            let expected = if pending.len() >= D {
                                report.depth_full += 1;
                                Some(ErrorKind::DepthExhausted { depth: D })
                            } else if let Some((tensor, bytes)) = misfit(kind, len) {
                                report.staging_full += 1;
                                Some(ErrorKind::StagingFull {
                                    tensor,
                                    bytes,
                                    capacity: STAGING,
                                })
                            } else {
                                None
                            };
                            // After a fault: poisoned, or the launch met the
                            // fault; the workload still comes back.
                            report.refused_after_fault += usize::from(expected.is_none());
                            checks::own_records(&kind_e).map_err(at)?;
                            if expected.as_ref() != Some(&kind_e) && !faulty {
                                return Err(at(format!(
                                    "errors: submit refused with {kind_e}, model {expected:?}"
                                )));
                            }
                        }
                    }
                }
                POp::Complete => {
                    complete(
                        &mut pipe,
                        &mut pending,
                        &mut model,
                        &mut report,
                        &mut back,
                        faulty,
                        flaw,
                        &mut flaw_fired,
                    )
                    .map_err(at)?;
                }
                POp::Drain => {
                    report.drains += 1;
                    pipe.drain().map_err(|e| at(format!("drain: {e}")))?;
                    for p in &mut pending {
                        p.settled = true;
                    }
                }
                POp::Restart(write) => {
                    if faulty {
                        pipe.drain().map_err(|e| at(format!("drain: {e}")))?;
                    }
                    drop(pipe);
                    // The pending runs went with the pipeline, which
                    // waited for them: what they wrote is in the buffer.
                    for p in pending.drain(..) {
                        account(&mut back, p.tag).map_err(at)?;
                        if p.kind == PKind::HostToBuf && flaw != PFlaw::DroppedNeverRan {
                            if faulty {
                                model.fill(None);
                            } else {
                                let f = program(p.program);
                                let m = p.input.len().min(SHARED_LEN);
                                for (v, x) in model.iter_mut().zip(&p.input[..m]) {
                                    *v = Some(f.apply_lossy(*x));
                                }
                            }
                        }
                    }
                    let h = runner.health();
                    if h.in_flight != 0 || !h.quarantined.is_empty() {
                        return Err(at(format!("the pipeline dropped: health {h:?}")));
                    }
                    let mut got = [0u32; SHARED_LEN];
                    runner
                        .device()
                        .read_buffer(&mut shared, 0, &mut got)
                        .map_err(|e| at(format!("read: {e}")))?;
                    known_eq("read of the shared buffer", &model, &got).map_err(at)?;
                    report.host_reads += 1;
                    if let Some(first) = write {
                        let vals: Vec<u32> = (0u32..).take(SHARED_LEN).map(|i| first ^ i).collect();
                        runner
                            .device()
                            .write_buffer(&mut shared, 0, &vals)
                            .map_err(|e| at(format!("write: {e}")))?;
                        model = vals.into_iter().map(Some).collect();
                    }
                    pipe = Pipeline::<_, D, u64>::new(&runner)
                        .map_err(|e| at(format!("a new pipeline: {e}")))?;
                }
            }
            let h = runner.health();
            let in_flight = pending.iter().filter(|p| !p.settled).count();
            if !faulty && (h.poisoned.is_some() || h.in_flight != in_flight) {
                return Err(at(format!(
                    "health {h:?}, model {in_flight} in flight, not poisoned"
                )));
            }
        }
        // The end: no more faults, everything back, a drain, one more run.
        sim.clear_faults();
        while !pending.is_empty() {
            complete(
                &mut pipe,
                &mut pending,
                &mut model,
                &mut report,
                &mut back,
                faulty,
                flaw,
                &mut flaw_fired,
            )
            .map_err(|e| format!("the end: {e}"))?;
        }
        complete(
            &mut pipe,
            &mut pending,
            &mut model,
            &mut report,
            &mut back,
            faulty,
            flaw,
            &mut flaw_fired,
        )
        .map_err(|e| format!("the end: {e}"))?;
        pipe.drain().map_err(|e| format!("the end: drain: {e}"))?;
        let p = Pending {
            tag: next_tag,
            kind: PKind::HostToHost,
            input: vec![1, 2],
            out_len: 2,
            program: 0,
            seen: model.clone(),
            settled: false,
        };
        made += 1;
        pipe.submit(build(codes[0], &shared, &p), p.tag)
            .map_err(|e| format!("after the drain: submit: {}", e.kind()))?;
        pending.push_back(p);
        complete(
            &mut pipe,
            &mut pending,
            &mut model,
            &mut report,
            &mut back,
            false,
            flaw,
            &mut flaw_fired,
        )
        .map_err(|e| format!("after the drain: {e}"))?;
        if back.len() != made {
            return Err(format!(
                "lost: {made} workloads made, {} handed back",
                back.len()
            ));
        }
        drop(pipe);
        let h = runner.health();
        if h.buffers_quarantined != 0
            || h.buffers_awaiting_free != 0
            || h.in_flight != 0
            || !h.quarantined.is_empty()
        {
            return Err(format!("the end: health {h:?}"));
        }
    }
    drop(shared);
    drop(dev);
    let stats = sim.stats();
    checks::no_leaks(&stats)?;
    checks::no_stale_code(&stats)?;
    Ok(report)
}

/// `complete` once, checked against the model.
#[allow(
    clippy::too_many_arguments,
    clippy::many_single_char_names,
    reason = "the case's state, borrowed apart; p, f, m, e, r: the run, its program, its length, the outcome"
)]
fn complete<const D: usize>(
    pipe: &mut Pipeline<'_, SimDriver, D, u64>,
    pending: &mut std::collections::VecDeque<Pending>,
    model: &mut Vec<Option<u32>>,
    report: &mut PReport,
    back: &mut BTreeSet<u64>,
    faulty: bool,
    flaw: PFlaw,
    fired: &mut bool,
) -> Result<(), String> {
    let mut got = pipe.complete();
    if flaw == PFlaw::Lose && !*fired && matches!(got, Ok(Some(_))) {
        *fired = true;
        got = Ok(None);
    }
    let Some(p) = pending.pop_front() else {
        return match got {
            Ok(None) => Ok(()),
            Ok(Some(d)) => Err(format!("duplicated: tag {} with nothing pending", d.tag)),
            Err(e) => Err(format!(
                "duplicated: an error with nothing pending: {}",
                e.kind()
            )),
        };
    };
    let f = program(p.program);
    // What the run reads, in stream order: the shared buffer after every
    // run submitted before it (they all came back before it).
    let src: Vec<Option<u32>> = match p.kind {
        PKind::BufToHost if flaw == PFlaw::IgnoreQueued => p.seen.clone(),
        PKind::BufToHost => model.clone(),
        _ => p.input.iter().copied().map(Some).collect(),
    };
    let m = src.len().min(match p.kind {
        PKind::HostToBuf => SHARED_LEN,
        _ => p.out_len,
    });
    let res: Vec<Option<u32>> = src[..m]
        .iter()
        .map(|x| x.map(|x| f.apply_lossy(x)))
        .collect();
    match got {
        Ok(None) => Err(format!("lost: nothing came back, tag {} pending", p.tag)),
        Ok(Some(mut done)) => {
            if done.tag != p.tag {
                return Err(format!(
                    "order: tag {} came back, tag {} was next",
                    done.tag, p.tag
                ));
            }
            if flaw == PFlaw::Corrupt
                && !*fired
                && let Some(w) = done.work.as_mut()
                && let Some(o) = owned_places(p.kind).1
                && let Some(v) = w.get_mut::<u32>(o).ok().and_then(|v| v.first_mut())
            {
                *fired = true;
                *v ^= 1;
            }
            account(back, p.tag)?;
            report.completed += 1;
            let mut want: Vec<Option<u32>> = vec![None; p.out_len];
            want[..m.min(p.out_len)].copy_from_slice(&res[..m.min(p.out_len)]);
            match p.kind {
                PKind::HostToBuf => {
                    model[..m].copy_from_slice(&res);
                    check_handed_back("a completed run", done.work.as_ref(), &p, None)
                }
                PKind::BufToHost => {
                    report.chained += usize::from(p.seen != *model);
                    check_handed_back("a completed run", done.work.as_ref(), &p, Some(&want))
                }
                PKind::HostToHost => {
                    check_handed_back("a completed run", done.work.as_ref(), &p, Some(&want))
                }
            }
        }
        Err(e) => {
            let kind = e.kind().clone();
            checks::own_records(&kind)?;
            if !faulty {
                return Err(format!(
                    "errors: tag {} failed without a fault: {kind}",
                    p.tag
                ));
            }
            let mut r = e.into_value();
            if flaw == PFlaw::CopyBackOnFailure
                && let Some(w) = r.work.as_mut()
                && let Some(o) = owned_places(p.kind).1
                && let Some(v) = w.get_mut::<u32>(o).ok()
            {
                v.fill(0);
            }
            if r.tag != p.tag {
                return Err(format!(
                    "order: tag {} failed, tag {} was next",
                    r.tag, p.tag
                ));
            }
            account(back, p.tag)?;
            report.failed += 1;
            if p.kind == PKind::HostToBuf {
                // It may or may not have written the buffer.
                model.fill(None);
            }
            check_handed_back("a failed run", r.work.as_ref(), &p, None)
        }
    }
}

// ----- pipeline: strategies and properties -------------------------------------------

fn pop() -> impl Strategy<Value = POp> {
    let kind = prop_oneof![
        Just(PKind::HostToHost),
        Just(PKind::HostToBuf),
        Just(PKind::BufToHost),
    ];
    // Mostly tensors that fit; now and then one the staging region refuses.
    let len = prop_oneof![6 => 1..=8usize, 1 => 9..=40usize];
    let kernel = prop_oneof![Just(Kernel::Aicore), Just(Kernel::Aicpu)];
    let fault = prop_oneof![
        (kernel, 1..3u64).prop_map(|(k, n)| PFault::Kernel(k, n)),
        (1..3u64).prop_map(PFault::RunError),
    ];
    prop_oneof![
        10 => (kind, len, any::<u32>(), 0..PROGRAMS).prop_map(|(k, l, v, p)| POp::Submit(k, l, v, p)),
        7 => Just(POp::Complete),
        1 => Just(POp::Drain),
        1 => prop::option::of(any::<u32>()).prop_map(POp::Restart),
        1 => fault.prop_map(POp::Inject),
    ]
}

fn pipeline_ops() -> impl Strategy<Value = Vec<POp>> {
    prop::collection::vec(pop(), 10..60)
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/proptest_workload.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn pipeline_depth2_hands_every_workload_back(ops in pipeline_ops(), seed in any::<u64>()) {
        pipeline_case::<2>(&ops, seed, PFlaw::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn pipeline_depth3_hands_every_workload_back(ops in pipeline_ops(), seed in any::<u64>()) {
        pipeline_case::<3>(&ops, seed, PFlaw::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn pipeline_depth4_hands_every_workload_back(ops in pipeline_ops(), seed in any::<u64>()) {
        pipeline_case::<4>(&ops, seed, PFlaw::None).map_err(TestCaseError::fail)?;
    }

    // The same properties under the a2a3 kernel ABI.

    #[test]
    fn a2a3_pipeline_depth2_hands_every_workload_back(ops in pipeline_ops(), seed in any::<u64>()) {
        pipeline_case_under::<2>(Abi::A2a3, &ops, seed, PFlaw::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a2a3_pipeline_depth3_hands_every_workload_back(ops in pipeline_ops(), seed in any::<u64>()) {
        pipeline_case_under::<3>(Abi::A2a3, &ops, seed, PFlaw::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a2a3_pipeline_depth4_hands_every_workload_back(ops in pipeline_ops(), seed in any::<u64>()) {
        pipeline_case_under::<4>(Abi::A2a3, &ops, seed, PFlaw::None).map_err(TestCaseError::fail)?;
    }
}

/// The generated pipeline cases exercise what they claim to: over 200
/// cases, runs complete and fail, submits are refused for every documented
/// reason, runs read what a queued run wrote, and drains happen.
#[test]
fn generated_pipeline_cases_do_real_work() {
    pipeline_cases_do_real_work(Abi::Runclaim);
}

/// The same measure under the a2a3 kernel ABI: its twins do as much.
#[test]
fn a2a3_generated_pipeline_cases_do_real_work() {
    pipeline_cases_do_real_work(Abi::A2a3);
}

fn pipeline_cases_do_real_work(abi: Abi) {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut sum = PReport::default();
    for seed in 0..200u64 {
        let ops = pipeline_ops().new_tree(&mut runner).unwrap().current();
        let r = pipeline_case_under::<3>(abi, &ops, seed, PFlaw::None).unwrap();
        sum.submitted += r.submitted;
        sum.completed += r.completed;
        sum.failed += r.failed;
        sum.staging_full += r.staging_full;
        sum.depth_full += r.depth_full;
        sum.refused_after_fault += r.refused_after_fault;
        sum.drains += r.drains;
        sum.host_reads += r.host_reads;
        sum.chained += r.chained;
    }
    println!("{}: pipeline, 200 cases: {sum:?}", abi.name());
    assert!(sum.completed >= 1000, "{sum:?}");
    assert!(sum.failed >= 50, "{sum:?}");
    assert!(sum.staging_full >= 100, "{sum:?}");
    assert!(sum.depth_full >= 50, "{sum:?}");
    assert!(sum.refused_after_fault >= 10, "{sum:?}");
    assert!(sum.drains >= 100, "{sum:?}");
    assert!(sum.host_reads >= 100, "{sum:?}");
    assert!(sum.chained >= 100, "{sum:?}");
}

// ----- negative controls: pipeline ---------------------------------------------------

/// `pipeline_case` without the flaw passes; with it, it fails with a
/// message containing `expect`.
fn pipeline_control(ops: &[POp], flaw: PFlaw, expect: &str) {
    pipeline_case::<2>(ops, 1, PFlaw::None).expect("the passing twin");
    let err = pipeline_case::<2>(ops, 1, flaw).expect_err("the flaw must be caught");
    assert!(err.contains(expect), "{flaw:?} caught, but as: {err}");
}

#[test]
fn a_pipeline_model_that_ignores_queued_writes_is_caught_by_the_value_check() {
    // Run 0 writes the shared buffer, run 1 (queued behind it) reads it.
    use POp::*;
    let ops = [
        Submit(PKind::HostToBuf, 8, 100, 0),
        Submit(PKind::BufToHost, 8, 0, 1),
        Complete,
        Complete,
    ];
    pipeline_control(&ops, PFlaw::IgnoreQueued, "values: a completed run");
}

#[test]
fn a_corrupted_owned_output_is_caught_by_the_value_check() {
    let ops = [POp::Submit(PKind::HostToHost, 2, 5, 0), POp::Complete];
    pipeline_control(&ops, PFlaw::Corrupt, "values: a completed run");
}

#[test]
fn a_swallowed_completion_is_caught_by_the_lost_check() {
    let ops = [POp::Submit(PKind::HostToHost, 2, 5, 0), POp::Complete];
    pipeline_control(&ops, PFlaw::Lose, "lost");
}

#[test]
fn a_copy_back_from_a_failed_run_is_caught() {
    let ops = [
        POp::Inject(PFault::RunError(1)),
        POp::Submit(PKind::HostToHost, 2, 5, 0),
        POp::Complete,
    ];
    pipeline_control(&ops, PFlaw::CopyBackOnFailure, "values: a failed run");
}

#[test]
fn a_refused_workload_not_handed_back_is_caught() {
    let ops = [POp::Submit(PKind::HostToHost, 40, 0, 0)];
    pipeline_control(&ops, PFlaw::KeepRefused, "handed back");
}

#[test]
fn a_write_that_does_not_wait_for_a_forgotten_reader_is_caught_by_the_read_check() {
    // A forgotten run reads (a slice of) buffer 0 into buffer 1; the host
    // then overwrites buffer 0 and reads buffer 1.
    let ops = vec![
        TOp::Batch(
            vec![launch(Src::Part(0, 1, 0), Dst::Buf(1), Then::Forget)],
            false,
        ),
        TOp::Write(0, vec![9, 9]),
        TOp::Read(1),
    ];
    typed_control(&ops, Flaw::WriteWithoutWait, "read of buffer 1");
}

#[test]
fn a_model_that_forgets_runs_dropped_with_the_pipeline_is_caught_by_the_host_read() {
    let ops = [POp::Submit(PKind::HostToBuf, 8, 100, 0), POp::Restart(None)];
    pipeline_control(&ops, PFlaw::DroppedNeverRan, "read of the shared buffer");
}

#[test]
fn a_model_that_frees_a_forgotten_slot_at_a_host_wait_is_caught_by_the_slot_check() {
    // The forgotten run in slot 0 is waited for by the read; the next run
    // asks for slot 0 first.
    let ops = vec![
        TOp::Batch(
            vec![launch(Src::Host(vec![3]), Dst::Buf(0), Then::Forget)],
            false,
        ),
        TOp::Read(0),
        TOp::Batch(
            vec![launch(Src::Host(vec![4]), Dst::Buf(1), Then::Finalize)],
            false,
        ),
    ];
    typed_control(&ops, Flaw::SlotBackAfterWait, "take slot 0");
}

/// A tensor of the id property: what was added, and its id.
#[derive(Clone, Copy, Debug)]
enum Added {
    OwnedU32(runclaim::OwnedId<u32>),
    OwnedF32(runclaim::OwnedId<f32>),
    InputU32(runclaim::TensorId<u32>),
}

/// Builds a workload of `kinds` (0: an owned `u32`, 1: an owned `f32`,
/// 2: a borrowed `u32` input), each tensor `i` holding `i` (one element),
/// with the id-returning builders.
fn id_workload<'a>(
    code: runclaim::CodeRef<'a>,
    kinds: &[u8],
    input: &'a [u32],
) -> (Workload<'a>, Vec<Added>) {
    let mut w = Workload::new(code);
    let ids = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let v = u32::try_from(i).expect("few tensors");
            match k % 3 {
                0 => Added::OwnedU32(w.add_owned(vec![v], Dir::In)),
                1 => Added::OwnedF32(w.add_owned(vec![v as f32], Dir::In)),
                _ => Added::InputU32(w.add_input(input)),
            }
        })
        .collect();
    (w, ids)
}

/// Checks that every id reads what its index reads in its own workload
/// and is refused by `twin`, built alike; and that a bare index probed
/// with a type answers as the model says: `NoTensor` past the tensors,
/// then the element type, then the kind. (`typed: false` flaws the model:
/// an owned tensor answers a probe of either type with its data.)
fn ids_agree_with_indices(
    kinds: &[u8],
    probes: &[(usize, u8)],
    typed: bool,
) -> Result<(), TestCaseError> {
    let mut dev = Device::<_, 2>::open(
        SimDriver::stepped(SimConfig::default()),
        DeviceConfig::default(),
    )
    .unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("p0").unwrap();
    let input = [7u32];
    let (w, ids) = id_workload(code, kinds, &input);
    let (twin, _) = id_workload(code, kinds, &input);
    let foreign = |i: usize| ErrorKind::ForeignTensor { tensor: i };
    for (i, id) in ids.iter().enumerate() {
        let v = u32::try_from(i).unwrap();
        match *id {
            Added::OwnedU32(id) => {
                prop_assert_eq!(id.id().index(), i);
                prop_assert_eq!(w.get(id).ok(), Some(&[v][..]));
                prop_assert_eq!(&w[id], w.get::<u32>(i).unwrap());
                prop_assert_eq!(twin.get(id).unwrap_err().kind().clone(), foreign(i));
            }
            Added::OwnedF32(id) => {
                prop_assert_eq!(w.get(id).ok(), Some(&[v as f32][..]));
                prop_assert_eq!(twin.get(id).unwrap_err().kind().clone(), foreign(i));
            }
            Added::InputU32(id) => {
                let e = w.get(id).unwrap_err();
                prop_assert_eq!(
                    e.kind().clone(),
                    ErrorKind::TensorMismatch {
                        tensor: i,
                        is: "a host input"
                    }
                );
                prop_assert_eq!(twin.get(id).unwrap_err().kind().clone(), foreign(i));
            }
        }
    }
    for &(i, ty) in probes {
        let (got, is_u32) = if ty % 2 == 0 {
            (w.get::<u32>(i).map(|v| f64::from(v[0])), true)
        } else {
            (w.get::<f32>(i).map(|v| f64::from(v[0])), false)
        };
        let want = match kinds.get(i).map(|k| k % 3) {
            None => Err(ErrorKind::NoTensor {
                index: i,
                count: kinds.len(),
            }),
            Some(0 | 1) if !typed => Ok(i as f64),
            Some(0) if is_u32 => Ok(i as f64),
            Some(1) if !is_u32 => Ok(i as f64),
            Some(2) if !is_u32 => Err(ErrorKind::TensorMismatch {
                tensor: i,
                is: "of another element type",
            }),
            Some(2) => Err(ErrorKind::TensorMismatch {
                tensor: i,
                is: "a host input",
            }),
            Some(_) => Err(ErrorKind::TensorMismatch {
                tensor: i,
                is: "of another element type",
            }),
        };
        prop_assert_eq!(
            got.map_err(|e| e.kind().clone()),
            want,
            "probe {} as {}",
            i,
            if is_u32 { "u32" } else { "f32" }
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/proptest_workload.txt",
        ))),
        ..ProptestConfig::default()
    })]

    /// Typed ids and bare indices name the same tensors, past the 16
    /// inline ones too; another workload built alike takes none of the ids.
    #[test]
    fn tensor_ids_agree_with_indices_and_no_other_workload_takes_them(
        kinds in prop::collection::vec(0u8..3, 1..24),
        probes in prop::collection::vec((0usize..30, 0u8..2), 1..16),
    ) {
        ids_agree_with_indices(&kinds, &probes, true)?;
    }
}

/// Negative control for the id property's checker: a model that forgets
/// the element type check (an owned `f32` tensor answering a `u32` probe
/// with its data) is caught on such a probe — and the real model passes
/// the same case.
#[test]
fn a_model_without_the_type_check_is_caught_by_the_id_property() {
    let case = ([0u8, 1, 2], [(1usize, 0u8)]);
    assert!(ids_agree_with_indices(&case.0, &case.1, false).is_err());
    assert!(ids_agree_with_indices(&case.0, &case.1, true).is_ok());
}
