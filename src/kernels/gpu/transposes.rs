//! [`Transposes`]: which operands of a matrix product enter transposed, shared by the product
//! op ([`super::gemm`]) and its cuBLAS call ([`super::cublas`]).

/// Which operands of [`super::GpuGemm::gemm`] enter transposed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Transposes {
    pub a: bool,
    pub b: bool,
}

impl Transposes {
    /// Neither operand transposed: `A · B`.
    pub const NONE: Transposes = Transposes { a: false, b: false };

    /// `(m, k, n)` of `op(A) · op(B)` for stored shapes `a`, `b`.
    pub fn sizes(self, a: [usize; 2], b: [usize; 2]) -> (usize, usize, usize) {
        let (m, k) = if self.a { (a[1], a[0]) } else { (a[0], a[1]) };
        let n = if self.b { b[0] } else { b[1] };
        (m, k, n)
    }
}
