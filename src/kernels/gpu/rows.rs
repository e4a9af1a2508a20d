//! The launch the row kernels share ([`super::row_norm`], [`super::cross_entropy`]): one cube
//! per row, its units striding over the row, cubes laid out over x (at most 65 535) then y.

use burn::tensor::Shape;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

/// The row this cube computes.
#[cube]
pub fn row_index() -> usize {
    (CUBE_POS_Y * CUBE_COUNT_X + CUBE_POS_X) as usize
}

/// Units per cube for rows of `width`: a power of two, at most 256 and the device's limit, at
/// least 32 (or the limit) and no more than the row needs.
pub fn units(t: &CubeTensor, width: usize) -> u32 {
    let max = t.client.properties().hardware.max_units_per_cube.clamp(1, 256);
    let max = if max.is_power_of_two() { max } else { max.next_power_of_two() >> 1 };
    (width.next_power_of_two() as u32).clamp(32.min(max), max)
}

/// The launch grid: one cube per row.
pub fn grid(rows: usize) -> CubeCount {
    let x = rows.clamp(1, 65_535);
    CubeCount::Static(x as u32, rows.div_ceil(x).max(1) as u32, 1)
}

/// An uninitialised contiguous tensor of `shape` on `like`'s device, in its type.
pub fn empty(like: &CubeTensor, shape: Shape) -> CubeTensor {
    empty_device_contiguous_dtype(like.client.clone(), like.device.clone(), shape, like.dtype)
}
