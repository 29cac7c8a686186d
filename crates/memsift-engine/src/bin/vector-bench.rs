//! Exact top-5 over N × 384 vectors, next to the time to merely read the same bytes once.
//!
//! `cargo run --release -p memsift-engine --bin vector-bench -- 100000` (N defaults to 100 000).
//! Prints `n=… dim=… topk_ms=… read_floor_ms=… ratio=…`, medians over 21 queries. The scan is
//! memory-bound, so the ratio says how close the search loop comes to the machine's bandwidth.
//! Prints figures only: nothing here asserts on time.

use std::hint::black_box;
use std::time::Instant;

use memsift_core::MemoryId;
use memsift_engine::held::ExactIndex;

const DIMENSION: usize = 384;
const QUERIES: usize = 21;
const TOP_K: usize = 5;

/// xorshift64: reproducible data without a dependency; values in [-1, 1).
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    fn vector(&mut self) -> Vec<f32> {
        (0..DIMENSION).map(|_| self.next()).collect()
    }
}

/// A sum with 16 accumulators, so the floor is a vectorized read like the search loop, not a
/// serial add chain that would flatter the search by comparison.
fn read_once(values: &[f32]) -> f32 {
    let mut sums = [0.0_f32; 16];
    let chunks = values.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (sum, value) in sums.iter_mut().zip(chunk) {
            *sum += value;
        }
    }
    sums.iter().sum::<f32>() + tail
}

fn median_ms(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let n: usize = match std::env::args().nth(1).map(|arg| arg.replace('_', "").parse()) {
        None => 100_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: vector-bench [N]   (N vectors, default 100000)");
            std::process::exit(2);
        }
    };
    let mut noise = Noise(0x2545_F491_4F6C_DD1D);
    let build_start = Instant::now();
    let mut index = ExactIndex::new(DIMENSION);
    for _ in 0..n {
        index
            .insert(MemoryId::new_v7(), &noise.vector())
            .expect("random vectors have the index's dimension");
    }
    let build_s = build_start.elapsed().as_secs_f64();

    let mut topk = Vec::with_capacity(QUERIES);
    let mut floor = Vec::with_capacity(QUERIES);
    for _ in 0..QUERIES {
        let query = noise.vector();
        let start = Instant::now();
        let hits = index.search(black_box(&query), TOP_K);
        topk.push(start.elapsed().as_secs_f64() * 1e3);
        black_box(hits);

        let start = Instant::now();
        black_box(read_once(black_box(index.rows())));
        floor.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let (topk_ms, read_floor_ms) = (median_ms(topk), median_ms(floor));
    println!(
        "n={n} dim={DIMENSION} k={TOP_K} queries={QUERIES} topk_ms={topk_ms:.3} read_floor_ms={read_floor_ms:.3} ratio={:.2} (built in {build_s:.1} s, {:.0} MB of rows)",
        topk_ms / read_floor_ms,
        (n * DIMENSION * 4) as f64 / 1e6
    );
}
