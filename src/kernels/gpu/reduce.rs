//! Reductions over a cube's units by a tree in shared memory: barriers only, no plane
//! operations, so every Vulkan driver (lavapipe included) runs them. `CUBE_DIM` must be a
//! power of two; every unit returns the result.

use cubecl::prelude::*;

/// Sum of each unit's `value` over the cube (a tree in shared memory; `CUBE_DIM` a power of
/// two). Every unit returns the total.
#[cube]
pub fn cube_sum<F: Float>(shared: &mut Shared<[F]>, value: F) -> F {
    shared[UNIT_POS as usize] = value;
    sync_cube();
    let mut active = CUBE_DIM;
    while active > 1 {
        active /= 2;
        if UNIT_POS < active {
            let other = shared[(UNIT_POS + active) as usize];
            shared[UNIT_POS as usize] += other;
        }
        sync_cube();
    }
    let total = shared[0];
    sync_cube();
    total
}

/// The largest of each unit's `value` over the cube (as [`cube_sum`]).
#[cube]
pub fn cube_max<F: Float>(shared: &mut Shared<[F]>, value: F) -> F {
    shared[UNIT_POS as usize] = value;
    sync_cube();
    let mut active = CUBE_DIM;
    while active > 1 {
        active /= 2;
        if UNIT_POS < active {
            let other = shared[(UNIT_POS + active) as usize];
            let mine = shared[UNIT_POS as usize];
            shared[UNIT_POS as usize] = select(other > mine, other, mine);
        }
        sync_cube();
    }
    let top = shared[0];
    sync_cube();
    top
}
