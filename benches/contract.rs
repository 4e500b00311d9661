//! Host cost of the claim contract: one full prepare → launch → fence →
//! finalize cycle on a driver that completes everything at once
//! (`InstantDriver`), at depth 2 and 3, against the same driver calls made
//! by hand without the contract. The difference is the contract's own work.
//!
//! Then the steady state of a full queue — retire the oldest run (fence,
//! finalize), launch the next into its slot — written as typed lanes by hand
//! and through `Pipeline` (complete + submit), at depth 2 and 3. The
//! difference is what the pipeline adds per run.
//!
//! Then a typed workload run's serial cycle (prepare → launch → fence →
//! finalize with `&mut work`, the workload built for each run) with 0, 4
//! and 16 bound arguments, against the `RunSpec` cycle: what each bound
//! argument costs the contract.
//!
//! Run: `cargo bench --bench contract` (a plain `harness = false` bench:
//! median of 7 batches, no extra dependency).
//!
//! For an instruction count, the bench binary runs one workload case alone
//! a fixed number of times, printing nothing, when `RUNCLAIM_BENCH_WORKLOAD`
//! names it (`spec`, `0`, `4`, `4s` or `16`; `RUNCLAIM_BENCH_ITERS` runs, default
//! 10,000; `replayspec` or `replay4`: the same `RunSpec` or 4-argument run
//! replayed from its slot's capture on `InstantDriver::with_capture`;
//! `dynspec`, `dyn0`, `dyn4`, `dyn16`: the case through a driver-erased
//! device, `Box<dyn Driver>`) — run
//! it under callgrind twice with different counts and divide the
//! difference:
//!
//! ```sh
//! cargo bench --bench contract --no-run   # prints the binary's path
//! RUNCLAIM_BENCH_WORKLOAD=4 RUNCLAIM_BENCH_ITERS=10000 \
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/deps/contract-…
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use runclaim::contract::{CodeRef, Depth, Slot, SlotOf, SupportedDepth};
use runclaim::driver::abi::{
    self, BlockBuf, DevSpan, Dir, Program, RunArgs, StatusRecord, TensorArg, WallRecord, WorkArgs,
};
use runclaim::driver::instant::InstantDriver;
use runclaim::driver::{AnyDriver, DevPtr, Driver};
use runclaim::{Callable, Device, DeviceBuffer, DeviceConfig, Input, Outputs, RunSpec, Workload};
use runclaim::{Launched, Pipeline, Run, Runner, SlotToken};

const ELEMS: usize = 16;
const BATCH: u32 = 20_000;
const BATCHES: usize = 7;

/// Median ns per iteration of `f` over `BATCHES` batches of `BATCH`.
fn time(mut f: impl FnMut()) -> f64 {
    for _ in 0..BATCH / 10 {
        f();
    }
    let mut per: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..BATCH {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(BATCH)
        })
        .collect();
    per.sort_by(f64::total_cmp);
    per[BATCHES / 2]
}

fn contract<const D: usize>() -> (f64, f64)
where
    Depth<D>: SupportedDepth,
    Slot<0>: SlotOf<D>,
    Slot<1>: SlotOf<D>,
{
    let mut dev = Device::<_, D>::open(
        InstantDriver::new(),
        DeviceConfig::default().max_elements(ELEMS),
    )
    .unwrap();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let code = runner.code("f").unwrap();
    let input = [7u32; ELEMS];
    let (mut o0, mut o1) = (Outputs::<0>::new(ELEMS), Outputs::<1>::new(ELEMS));
    let mut t0 = Some(runner.take_slot::<0>().unwrap());
    let mut t1 = Some(runner.take_slot::<1>().unwrap());
    let serial = time(|| {
        let token = t0.take().unwrap();
        let run = runner
            .prepare(token, RunSpec::new(code, Input::Host(&input)))
            .unwrap();
        let done = run
            .launch()
            .unwrap()
            .fence()
            .unwrap()
            .finalize(&mut o0)
            .unwrap();
        t0 = Some(black_box(done).token);
    });
    // Two in flight; per run = half a pair.
    let queued = time(|| {
        let r0 = runner
            .prepare(t0.take().unwrap(), RunSpec::new(code, Input::Host(&input)))
            .unwrap()
            .launch()
            .unwrap();
        let r1 = runner
            .prepare(t1.take().unwrap(), RunSpec::new(code, Input::Host(&input)))
            .unwrap()
            .launch()
            .unwrap();
        t0 = Some(r0.fence().unwrap().finalize(&mut o0).unwrap().token);
        t1 = Some(r1.fence().unwrap().finalize(&mut o1).unwrap().token);
    }) / 2.0;
    (serial, queued)
}

/// The driver calls one `RunSpec` run makes through the contract, made by
/// hand (see [`ByHand`]).
fn by_hand() -> f64 {
    let mut h = ByHand::new();
    time(|| h.cycle(Case::Spec))
}

/// One typed lane written by hand, as `examples/pipeline.rs` had them.
struct Lane<'r, const I: usize> {
    token: Option<SlotToken<'r, I>>,
    run: Option<Run<'r, Launched, I>>,
    out: Outputs<I>,
}

impl<'r, const I: usize> Lane<'r, I> {
    fn new<const D: usize>(runner: &'r Runner<'_, InstantDriver, D>) -> Self
    where
        Slot<I>: SlotOf<D>,
    {
        Lane {
            token: Some(runner.take_slot::<I>().unwrap()),
            run: None,
            out: Outputs::new(ELEMS),
        }
    }

    /// Retires this slot's run, then launches the next one into it.
    fn turn<const D: usize>(
        &mut self,
        runner: &'r Runner<'_, InstantDriver, D>,
        spec: RunSpec<'_>,
    ) {
        if let Some(run) = self.run.take() {
            let done = run.fence().unwrap().finalize(&mut self.out).unwrap();
            black_box((done.wall, self.out.values()));
            self.token = Some(done.token);
        }
        let token = self.token.take().unwrap();
        self.run = Some(runner.prepare(token, spec).unwrap().launch().unwrap());
    }
}

/// Median ns per iteration of `f` and of `g`, and the median of their
/// per-batch difference, over `2 * BATCHES + 1` alternating batches (so
/// that drift on a busy machine hits both alike).
fn time_pair(mut f: impl FnMut(), mut g: impl FnMut()) -> (f64, f64, f64) {
    for _ in 0..BATCH / 10 {
        f();
        g();
    }
    let batch = |h: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..BATCH {
            h();
        }
        t.elapsed().as_nanos() as f64 / f64::from(BATCH)
    };
    let (mut fs, mut gs, mut ds) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..=(2 * BATCHES) {
        let (a, b) = if i % 2 == 0 {
            let a = batch(&mut f);
            (a, batch(&mut g))
        } else {
            let b = batch(&mut g);
            (batch(&mut f), b)
        };
        fs.push(a);
        gs.push(b);
        ds.push(b - a);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(&mut fs), median(&mut gs), median(&mut ds))
}

/// A device with one callable, `f`, on the instant driver.
fn instant_device<const D: usize>() -> Device<InstantDriver, D>
where
    Depth<D>: SupportedDepth,
{
    Device::open(
        InstantDriver::new(),
        DeviceConfig::default().max_elements(ELEMS),
    )
    .unwrap()
}

/// ns per run of a full queue — typed lanes by hand on one device, the
/// pipeline on another, timed in alternating batches — and the median
/// difference.
macro_rules! steady {
    ($name:ident, $depth:literal, $($lane:ident = $i:literal),+) => {
        fn $name() -> (f64, f64, f64) {
            let callable = [Callable::program("f", &Program::new().add(1))];
            let input = [7u32; ELEMS];
            let mut dev_hand = instant_device::<$depth>();
            let hand = dev_hand.publish(&callable).unwrap();
            let hand_spec = RunSpec::new(hand.code("f").unwrap(), Input::Host(&input));
            $(let mut $lane = Lane::<$i>::new(&hand);)+
            let mut dev_pipe = instant_device::<$depth>();
            let piped = dev_pipe.publish(&callable).unwrap();
            let pipe_spec = RunSpec::new(piped.code("f").unwrap(), Input::Host(&input));
            let mut pipe = Pipeline::<_, $depth, u64>::new(&piped).unwrap();
            let mut tag = 0;
            let (by_hand, through, added) = time_pair(
                || {
                    $($lane.turn(&hand, hand_spec);)+
                },
                || {
                    for _ in 0..$depth {
                        if pipe.is_full() {
                            let done = pipe.complete().unwrap().unwrap();
                            black_box((done.tag, done.wall, done.values));
                        }
                        pipe.submit(pipe_spec, tag).unwrap();
                        tag += 1;
                    }
                },
            );
            let per_run = f64::from($depth);
            (by_hand / per_run, through / per_run, added / per_run)
        }
    };
}

steady!(steady2, 2, a = 0, b = 1);
steady!(steady3, 3, a = 0, b = 1, c = 2);

/// The bound arguments of a workload case: host tensors are `ELEMS` u32
/// each (staged: inputs copied in at prepare, outputs cleared then — one
/// memset per run — and copied out at finalize), device buffers `ELEMS`
/// u32 each (bound by address), scalars `u64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// `RunSpec::new(code, Input::Host(&x))`, finalized into `Outputs`.
    Spec,
    /// No tensor, no scalar.
    Args0,
    /// 1 host input, 1 host output, 2 device buffers (`In`, `InOut`).
    Args4,
    /// The same 4 tensors and 4 scalars (`u64`, `u32`, `f32`, `i32`).
    Args4s,
    /// 4 host inputs, 2 host outputs, 6 device buffers (3 `In`, 2 `InOut`,
    /// 1 `Out`), 4 scalars.
    Args16,
}

impl Case {
    fn args(self) -> usize {
        match self {
            Case::Spec | Case::Args0 => 0,
            Case::Args4 => 4,
            Case::Args4s => 8,
            Case::Args16 => 16,
        }
    }

    fn mix(self) -> &'static str {
        match self {
            Case::Spec => "RunSpec, Input::Host",
            Case::Args0 => "no tensor, no scalar",
            Case::Args4 => "1 host in + 1 host out + 2 device buffers",
            Case::Args4s => "the same + 4 scalars",
            Case::Args16 => "4 host in + 2 host out + 6 device buffers + 4 scalars",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "spec" => Some(Case::Spec),
            "0" => Some(Case::Args0),
            "4" => Some(Case::Args4),
            "4s" => Some(Case::Args4s),
            "16" => Some(Case::Args16),
            _ => None,
        }
    }
}

/// A serial-cycle bench on one slot of a depth-2 instant device: the host
/// tensors, the device buffers, the slot's token.
struct WorkBench<'r, D: Driver, const I: usize> {
    runner: &'r Runner<'r, D, 2>,
    code: CodeRef<'r>,
    bufs: &'r [DeviceBuffer<u32>],
    ins: [[u32; ELEMS]; 4],
    outs: [[u32; ELEMS]; 2],
    spec_out: Outputs<I>,
    token: Option<SlotToken<'r, I>>,
}

impl<'r, D: Driver, const I: usize> WorkBench<'r, D, I>
where
    Slot<I>: SlotOf<2>,
{
    fn new(runner: &'r Runner<'r, D, 2>, bufs: &'r [DeviceBuffer<u32>]) -> Self {
        WorkBench {
            runner,
            code: runner.code("f").unwrap(),
            bufs,
            ins: std::array::from_fn(|k| [u32::try_from(k).unwrap() + 7; ELEMS]),
            outs: [[0; ELEMS]; 2],
            spec_out: Outputs::new(ELEMS),
            token: Some(runner.take_slot::<I>().unwrap()),
        }
    }

    /// One serial cycle of `case`; the workload is built for the run (its
    /// host outputs are borrowed until finalize).
    #[inline(never)]
    fn cycle(&mut self, case: Case) {
        let token = self.token.take().unwrap();
        let (runner, code, b) = (self.runner, self.code, self.bufs);
        if case == Case::Spec {
            let spec = RunSpec::new(code, Input::Host(&self.ins[0]));
            let run = runner.prepare(token, spec).unwrap();
            let done = run.launch().unwrap().fence().unwrap();
            let done = done.finalize(&mut self.spec_out).unwrap();
            self.token = Some(black_box(done).token);
            return;
        }
        let ins = &self.ins;
        let [o0, o1] = &mut self.outs;
        let mut work = Workload::new(code);
        match case {
            Case::Spec | Case::Args0 => &mut work,
            Case::Args4 => work
                .input(&ins[0])
                .output(o0)
                .buffer(&b[0], Dir::In)
                .buffer(&b[1], Dir::InOut),
            Case::Args4s => work
                .input(&ins[0])
                .output(o0)
                .buffer(&b[0], Dir::In)
                .buffer(&b[1], Dir::InOut)
                .scalar(1u64)
                .scalar(2u32)
                .scalar(0.5f32)
                .scalar(-1i32),
            Case::Args16 => work
                .input(&ins[0])
                .output(o0)
                .input(&ins[1])
                .input(&ins[2])
                .input(&ins[3])
                .output(o1)
                .buffer(&b[0], Dir::In)
                .buffer(&b[1], Dir::In)
                .buffer(&b[2], Dir::In)
                .buffer(&b[3], Dir::InOut)
                .buffer(&b[4], Dir::InOut)
                .buffer(&b[5], Dir::Out)
                .scalar(1)
                .scalar(2)
                .scalar(u64::from(0.5f32.to_bits()))
                .scalar(u64::MAX),
        };
        let run = runner.prepare(token, &mut work).unwrap();
        let done = run.launch().unwrap().fence().unwrap().finalize().unwrap();
        self.token = Some(black_box(done).token);
    }

    /// The cycles computed: the program's `+1` from the first readable into
    /// the first writable tensor.
    fn check(&self, case: Case) {
        match case {
            Case::Spec => assert_eq!(self.spec_out.values(), &[8; ELEMS][..]),
            Case::Args0 => {}
            Case::Args4 | Case::Args4s | Case::Args16 => assert_eq!(self.outs[0], [8; ELEMS]),
        }
    }
}

/// A depth-2 instant device with `f` (`+1`) and six device buffers.
fn work_device<D: Driver>(driver: D) -> (Device<D, 2>, Vec<DeviceBuffer<u32>>) {
    let dev = Device::open(driver, DeviceConfig::default().max_elements(ELEMS)).unwrap();
    let bufs = (0..6)
        .map(|_| dev.alloc_buffer::<u32>(ELEMS).unwrap())
        .collect();
    (dev, bufs)
}

const CASES: [Case; 5] = [
    Case::Spec,
    Case::Args0,
    Case::Args4,
    Case::Args4s,
    Case::Args16,
];

/// ns per run of each workload case and of the `RunSpec` cycle, timed in
/// rounds of one batch per case (the order rotating each round, so that
/// drift on a busy machine hits all alike): per case, the median of its
/// batches and the medians of its per-round differences over the
/// 0-argument workload and over the `RunSpec` cycle.
fn workloads() -> Vec<(Case, f64, f64, f64)> {
    let (mut dev, bufs) = work_device(InstantDriver::new());
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let mut w = WorkBench::<_, 0>::new(&runner, &bufs);
    for case in CASES {
        for _ in 0..BATCH / 10 {
            w.cycle(case);
        }
    }
    let rounds = 2 * BATCHES + 1;
    let mut times = vec![[0.0; CASES.len()]; rounds];
    for (r, round) in times.iter_mut().enumerate() {
        for k in 0..CASES.len() {
            let c = (r + k) % CASES.len();
            let t = Instant::now();
            for _ in 0..BATCH {
                w.cycle(CASES[c]);
            }
            round[c] = t.elapsed().as_nanos() as f64 / f64::from(BATCH);
        }
    }
    for case in CASES {
        w.check(case);
    }
    let median = |f: &dyn Fn(&[f64; CASES.len()]) -> f64| {
        let mut v: Vec<f64> = times.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    CASES
        .iter()
        .enumerate()
        .map(|(c, &case)| {
            (
                case,
                median(&|t| t[c]),
                median(&|t| t[c] - t[1]),
                median(&|t| t[c] - t[0]),
            )
        })
        .collect()
}

/// The driver calls one workload run of `case` makes through the contract,
/// made by hand (no contract): the host outputs' staging cleared (one
/// memset, as the contract clears the span its pure outputs lie in), the
/// host inputs copied in, the records prepared (one copy of their image,
/// a `RunSpec` run's input after it), the block encoded, both
/// kernels and the fence queued and waited for, the records and the host
/// outputs read back. What the contract adds is the difference.
struct ByHand {
    d: InstantDriver,
    staging: DevPtr,
    /// A `RunSpec` run's input and output, right after the regions.
    arena: DevPtr,
    /// The handshake, wall and status regions in one allocation, laid out
    /// as the device lays them out (each at a multiple of 64 bytes), the
    /// arena after them: one copy of `image` prepares them (zeroed, the
    /// status armed) and carries a `RunSpec` run's input; one copy reads
    /// the wall and the status back.
    hs: DevPtr,
    wall: DevPtr,
    status: DevPtr,
    bufs: [DevPtr; 6],
    streams: (runclaim::driver::StreamId, runclaim::driver::StreamId),
    events: (runclaim::driver::EventId, runclaim::driver::EventId),
    kernel: runclaim::driver::CodeHandle,
    ins: [[u8; ELEMS * 4]; 4],
    outs: [[u8; ELEMS * 4]; 2],
    run_id: u64,
    bytes: Vec<u8>,
    block: BlockBuf,
    /// The regions' image (`regions` bytes), then room for an input.
    image: Vec<u8>,
    regions: usize,
}

const BLOCK_DIM: u32 = 4;

impl ByHand {
    fn new() -> Self {
        let d = InstantDriver::new();
        let wall_at = abi::handshake_bytes(BLOCK_DIM).next_multiple_of(64);
        let status_at = (wall_at + WallRecord::SIZE).next_multiple_of(64);
        let bytes = (status_at + StatusRecord::SIZE).next_multiple_of(64);
        let regions = d.alloc(bytes + ELEMS * 8).unwrap();
        ByHand {
            staging: d.alloc(64 << 10).unwrap(),
            arena: regions.offset(bytes),
            hs: regions,
            wall: regions.offset(wall_at),
            status: regions.offset(status_at),
            bufs: std::array::from_fn(|_| d.alloc(ELEMS * 4).unwrap()),
            streams: (d.create_stream().unwrap(), d.create_stream().unwrap()),
            events: (d.create_event().unwrap(), d.create_event().unwrap()),
            kernel: d
                .register_code(&Program::new().add(1).encode())
                .unwrap()
                .handle,
            ins: [[7; ELEMS * 4]; 4],
            outs: [[0; ELEMS * 4]; 2],
            run_id: 0,
            bytes: vec![0; WorkArgs::MAX_SIZE],
            block: BlockBuf::with_capacity(WorkArgs::MAX_SIZE, 32),
            image: vec![0; bytes + ELEMS * 4],
            regions: bytes,
            d,
        }
    }

    /// The block, encoded, then handed to the driver with its addresses
    /// recorded (the least a caller can do: the driver checks exactly
    /// these).
    fn encode(
        bytes: &mut [u8],
        block: &mut BlockBuf,
        header: &RunArgs,
        tensors: &[TensorArg],
        scalars: &[u64],
    ) {
        let size = WorkArgs::encode(bytes, header, tensors.iter().copied(), scalars).unwrap();
        let mut w = block.writer();
        w.grow(size).unwrap();
        w.put_bytes(0, &bytes[..size]).unwrap();
        let span = |addr: u64, len: usize| DevSpan::new(DevPtr::from_raw(addr), len as u64);
        w.put_addr(48, span(header.handshake, abi::handshake_bytes(BLOCK_DIM)))
            .unwrap();
        w.put_addr(56, span(header.wall, WallRecord::SIZE)).unwrap();
        w.put_addr(64, span(header.status, StatusRecord::SIZE))
            .unwrap();
        for (i, t) in tensors.iter().enumerate() {
            w.put_addr(
                WorkArgs::HEADER + i * TensorArg::SIZE,
                span(t.addr, ELEMS * 4),
            )
            .unwrap();
        }
    }

    /// A `RunSpec` run's version-1 block: its input and output in `arena`.
    fn encode_v1(block: &mut BlockBuf, header: &RunArgs, arena: DevPtr) {
        let args = RunArgs {
            len: ELEMS as u64,
            input: arena.raw(),
            output: arena.offset(ELEMS * 4).raw(),
            ..*header
        };
        let mut w = block.writer();
        w.grow(RunArgs::SIZE).unwrap();
        w.put_bytes(0, &args.to_bytes()).unwrap();
        let span = |addr: u64, len: usize| DevSpan::new(DevPtr::from_raw(addr), len as u64);
        for (at, addr, len) in [
            (32, args.input, ELEMS * 4),
            (40, args.output, ELEMS * 4),
            (48, args.handshake, abi::handshake_bytes(BLOCK_DIM)),
            (56, args.wall, WallRecord::SIZE),
            (64, args.status, StatusRecord::SIZE),
        ] {
            w.put_addr(at, span(addr, len)).unwrap();
        }
    }

    /// The tensors of a case: `host_in` staged inputs, `host_out` staged
    /// outputs, then the device buffers of directions `bufs`.
    fn tensors(&self, host_in: usize, host_out: usize, bufs: &[Dir]) -> [TensorArg; 12] {
        let bytes = (ELEMS * 4) as u64;
        let at = |k: usize| self.staging.offset(k * 64);
        let host = (0..host_in + host_out).map(|k| TensorArg {
            addr: at(k).raw(),
            bytes,
            elem_size: 4,
            dir: if k < host_in { Dir::In } else { Dir::Out },
            staged: true,
        });
        let device = bufs.iter().zip(&self.bufs).map(|(&dir, p)| TensorArg {
            addr: p.raw(),
            bytes,
            elem_size: 4,
            dir,
            staged: false,
        });
        let mut all = [TensorArg {
            addr: 0,
            bytes: 0,
            elem_size: 0,
            dir: Dir::In,
            staged: false,
        }; 12];
        for (slot, t) in all.iter_mut().zip(host.chain(device)) {
            *slot = t;
        }
        all
    }

    #[inline(never)]
    fn cycle(&mut self, case: Case) {
        let d = &self.d;
        self.run_id += 1;
        let (host_in, host_out, bufs, scalars): (usize, usize, &[Dir], usize) = match case {
            Case::Spec | Case::Args0 => (0, 0, &[], 0),
            Case::Args4 => (1, 1, &[Dir::In, Dir::InOut], 0),
            Case::Args4s => (1, 1, &[Dir::In, Dir::InOut], 4),
            Case::Args16 => (
                4,
                2,
                &[Dir::In, Dir::In, Dir::In, Dir::InOut, Dir::InOut, Dir::Out],
                4,
            ),
        };
        let at = |k: usize| self.staging.offset(k * 64);
        if host_out > 0 {
            d.memset(at(host_in), 0, host_out * 64).unwrap();
        }
        for k in 0..host_in {
            d.copy_to_device(at(k), &self.ins[k]).unwrap();
        }
        let armed = StatusRecord {
            run_id: self.run_id,
            state: StatusRecord::ARMED,
            code: 0,
        };
        let n = self.regions;
        let status_at = usize::try_from(self.status.raw() - self.hs.raw()).unwrap();
        self.image[..n].fill(0);
        self.image[status_at..status_at + StatusRecord::SIZE].copy_from_slice(&armed.to_bytes());
        let with_input = if case == Case::Spec {
            self.image[n..].copy_from_slice(&self.ins[0]);
            self.image.len()
        } else {
            n
        };
        d.copy_to_device(self.hs, &self.image[..with_input])
            .unwrap();
        let header = RunArgs {
            run_id: self.run_id,
            slot: 0,
            block_dim: BLOCK_DIM,
            len: 0,
            input: 0,
            output: 0,
            handshake: self.hs.raw(),
            wall: self.wall.raw(),
            status: self.status.raw(),
        };
        let tensors = self.tensors(host_in, host_out, bufs);
        let n = host_in + host_out + bufs.len();
        let scalar_values = [1, 2, u64::from(0.5f32.to_bits()), u64::MAX];
        if case == Case::Spec {
            Self::encode_v1(&mut self.block, &header, self.arena);
        } else {
            Self::encode(
                &mut self.bytes,
                &mut self.block,
                &header,
                &tensors[..n],
                &scalar_values[..scalars],
            );
        }
        let args = self.block.args();
        let (core, cpu) = self.streams;
        let (ev_core, ev_fence) = self.events;
        d.launch_aicore(core, self.kernel, BLOCK_DIM, args).unwrap();
        d.launch_aicpu(cpu, args).unwrap();
        d.record_event(ev_core, core).unwrap();
        d.stream_wait_event(cpu, ev_core).unwrap();
        d.record_event(ev_fence, cpu).unwrap();
        d.sync_event(ev_fence, Duration::from_secs(1)).unwrap();
        let mut records = [0u8; 128];
        let joint =
            usize::try_from(self.status.raw() - self.wall.raw()).unwrap() + StatusRecord::SIZE;
        d.copy_from_device(&mut records[..joint], self.wall)
            .unwrap();
        for k in 0..host_out {
            d.copy_from_device(&mut self.outs[k], at(host_in + k))
                .unwrap();
        }
        if case == Case::Spec {
            d.copy_from_device(&mut self.outs[0], self.arena.offset(ELEMS * 4))
                .unwrap();
        }
        black_box((&records, &self.outs));
    }
}

/// `RUNCLAIM_BENCH_WORKLOAD=replayspec` or `replay4`: the `RunSpec` or the
/// 4-argument cycle, every run replayed from slot 0's capture (made once,
/// before the count), on an instant device that captures.
fn replay_only(case: Case, iters: u64) {
    let dev = Device::<_, 2>::open(
        InstantDriver::with_capture(),
        DeviceConfig::default().max_elements(ELEMS),
    )
    .unwrap();
    let bufs: Vec<DeviceBuffer<u32>> = (0..2)
        .map(|_| dev.alloc_buffer::<u32>(ELEMS).unwrap())
        .collect();
    let mut dev = dev;
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let code = runner.code("f").unwrap();
    let input = [7u32; ELEMS];
    let mut output = [0u32; ELEMS];
    let mut out = Outputs::<0>::new(ELEMS);
    let mut token = Some(runner.take_slot::<0>().unwrap());
    let mut capture = None;
    for k in 0..101 + iters {
        let held = token.take().unwrap();
        let done = if case == Case::Spec {
            let prepared = runner
                .prepare(held, RunSpec::new(code, Input::Host(&input)))
                .unwrap();
            let run = if let Some(c) = &capture {
                prepared.replay(c).unwrap()
            } else {
                let (run, c) = prepared.capture().unwrap();
                capture = Some(c);
                run
            };
            run.fence().unwrap().finalize(&mut out).unwrap().token
        } else {
            let mut work = Workload::new(code);
            work.input(&input)
                .output(&mut output)
                .buffer(&bufs[0], Dir::In)
                .buffer(&bufs[1], Dir::InOut);
            let prepared = runner.prepare(held, &mut work).unwrap();
            let run = if let Some(c) = &capture {
                prepared.replay(c).unwrap()
            } else {
                let (run, c) = prepared.capture().unwrap();
                capture = Some(c);
                run
            };
            run.fence().unwrap().finalize().unwrap().token
        };
        token = Some(black_box(done));
        black_box(k);
    }
    if case == Case::Spec {
        assert_eq!(out.values(), &[8; ELEMS][..]);
    } else {
        assert_eq!(output, [8; ELEMS]);
    }
    drop((token, capture));
}

/// `RUNCLAIM_BENCH_WORKLOAD=<case>`: that case alone, `RUNCLAIM_BENCH_ITERS`
/// times after 100 warm-up runs, for an instruction counter.
fn workload_only(case: &str) {
    if let Some(replayed) = case.strip_prefix("replay") {
        let case = Case::parse(replayed)
            .filter(|c| matches!(c, Case::Spec | Case::Args4))
            .unwrap_or_else(|| {
                panic!("RUNCLAIM_BENCH_WORKLOAD: replayspec or replay4, not {case:?}")
            });
        let iters: u64 = std::env::var("RUNCLAIM_BENCH_ITERS")
            .map_or(Ok(10_000), |s| s.parse())
            .expect("RUNCLAIM_BENCH_ITERS: a whole number");
        replay_only(case, iters);
        return;
    }
    if let Some(hand) = case.strip_prefix("hand") {
        let case = Case::parse(hand).unwrap_or_else(|| {
            panic!(
                "RUNCLAIM_BENCH_WORKLOAD: handspec, hand0, hand4, hand4s or hand16, not {case:?}"
            )
        });
        let iters: u64 = std::env::var("RUNCLAIM_BENCH_ITERS")
            .map_or(Ok(10_000), |s| s.parse())
            .expect("RUNCLAIM_BENCH_ITERS: a whole number");
        let mut h = ByHand::new();
        for _ in 0..100 + iters {
            h.cycle(case);
        }
        return;
    }
    // `dyn…`: the same case through a driver-erased device
    // (`Box<dyn Driver>`), for what erasure costs per run.
    match case.strip_prefix("dyn") {
        Some(case) => counted(
            work_device(Box::new(InstantDriver::new()) as AnyDriver),
            case,
        ),
        None => counted(work_device(InstantDriver::new()), case),
    }
}

/// `case` run `RUNCLAIM_BENCH_ITERS` times after 100 warm-up runs on `dev`.
fn counted<D: Driver>((mut dev, bufs): (Device<D, 2>, Vec<DeviceBuffer<u32>>), case: &str) {
    let case = Case::parse(case).unwrap_or_else(|| {
        panic!("RUNCLAIM_BENCH_WORKLOAD: [dyn]spec, 0, 4, 4s or 16, not {case:?}")
    });
    let iters: u64 = std::env::var("RUNCLAIM_BENCH_ITERS")
        .map_or(Ok(10_000), |s| s.parse())
        .expect("RUNCLAIM_BENCH_ITERS: a whole number");
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let mut w = WorkBench::<D, 0>::new(&runner, &bufs);
    for _ in 0..100 {
        w.cycle(case);
    }
    for _ in 0..iters {
        w.cycle(case);
    }
    w.check(case);
}

fn main() {
    if let Ok(case) = std::env::var("RUNCLAIM_BENCH_WORKLOAD") {
        workload_only(&case);
        return;
    }
    // `cargo test --benches` runs this binary with `--bench` absent; keep it quick then.
    let quick = !std::env::args().any(|a| a == "--bench");
    if quick {
        println!("contract bench: run with `cargo bench --bench contract` for numbers");
        return;
    }
    let raw = by_hand();
    let (s2, q2) = contract::<2>();
    let (s3, q3) = contract::<3>();
    let (h2, p2, a2) = steady2();
    let (h3, p3, a3) = steady3();
    println!("host cost per run ({ELEMS} elements, InstantDriver; median of {BATCHES} × {BATCH})");
    println!("  driver calls by hand (no contract):   {raw:>7.0} ns");
    for (name, v) in [
        ("depth 2, serial cycle", s2),
        ("depth 2, two in flight", q2),
        ("depth 3, serial cycle", s3),
        ("depth 3, two in flight", q3),
    ] {
        println!(
            "  {name:<36} {v:>7.0} ns   contract's own: {:>6.0} ns",
            v - raw
        );
    }
    println!("full queue, per run (retire the oldest, launch the next into its slot)");
    for (depth, hand, pipe, added) in [(2, h2, p2, a2), (3, h3, p3, a3)] {
        println!(
            "  depth {depth}: typed lanes by hand {hand:>5.0} ns, pipeline {pipe:>5.0} ns   \
             the pipeline adds: {added:>4.0} ns"
        );
    }
    println!(
        "typed workload run, serial cycle (prepare → launch → fence → finalize, \
         the workload built per run; host tensors {ELEMS} u32 staged, device buffers by address)"
    );
    let results = workloads();
    for &(case, ns, over_zero, over_spec) in &results {
        let args = case.args();
        let label = if case == Case::Spec {
            "RunSpec cycle".to_owned()
        } else {
            format!("{args:>2} args")
        };
        let per = |d: f64| {
            if args == 0 {
                format!("{d:>+6.0} ns")
            } else {
                format!("{:>+6.1} ns/arg", d / args as f64)
            }
        };
        let cmp = match case {
            Case::Spec => String::new(),
            Case::Args0 => format!("   over RunSpec: {}", per(over_spec)),
            Case::Args4 | Case::Args4s | Case::Args16 => format!(
                "   over 0 args: {}, over RunSpec: {}",
                per(over_zero),
                per(over_spec)
            ),
        };
        println!("  {label:<13} {ns:>7.0} ns  ({}){cmp}", case.mix());
    }
    // The contract's own cost: each case minus the same driver calls made
    // by hand (`ByHand`), and what one more argument adds to that.
    let own = |case: Case| {
        let mut h = ByHand::new();
        let hand = time(|| h.cycle(case));
        let ns = results
            .iter()
            .find(|r| r.0 == case)
            .map_or(f64::NAN, |r| r.1);
        ns - hand
    };
    let zero = own(Case::Args0);
    println!("  the contract's own (minus the same driver calls by hand): {zero:.0} ns at 0 args");
    for case in [Case::Args4, Case::Args4s, Case::Args16] {
        let d = own(case) - zero;
        println!(
            "    {:>2} args: {:+.1} ns/arg over 0 args",
            case.args(),
            d / case.args() as f64
        );
    }
}
