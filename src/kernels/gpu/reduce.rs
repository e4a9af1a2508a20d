//! Reductions over a cube's units by a tree in shared memory: barriers only, no plane
//! operations, so every Vulkan driver (lavapipe included) runs them. `CUBE_DIM` must be a
//! power of two; every unit returns the result.

use cubecl::prelude::*;

/// Sum of each unit's `value` over the cube.
#[cube]
pub fn cube_sum<F: Float>(shared: &mut Shared<[F]>, value: F) -> F {
    tree::<F>(shared, value, false)
}

/// The largest of each unit's `value` over the cube.
#[cube]
pub fn cube_max<F: Float>(shared: &mut Shared<[F]>, value: F) -> F {
    tree::<F>(shared, value, true)
}

/// The units' values combined pairwise, halving the active units each round: by `max`, or by
/// `+`.
#[cube]
fn tree<F: Float>(shared: &mut Shared<[F]>, value: F, #[comptime] max: bool) -> F {
    shared[UNIT_POS as usize] = value;
    sync_cube();
    let mut active = CUBE_DIM;
    while active > 1 {
        active /= 2;
        if UNIT_POS < active {
            let other = shared[(UNIT_POS + active) as usize];
            let mine = shared[UNIT_POS as usize];
            if max {
                shared[UNIT_POS as usize] = select(other > mine, other, mine);
            } else {
                shared[UNIT_POS as usize] = mine + other;
            }
        }
        sync_cube();
    }
    let result = shared[0];
    // No unit may write `shared` again before every unit has read the result.
    sync_cube();
    result
}
