//! cuBLAS on burn's CUDA buffers, through `cudarc` (the library loaded at run time: the
//! `libcublas` of the CUDA toolkit or of PyTorch's `nvidia-cublas` wheel on `LD_LIBRARY_PATH`),
//! without forking burn: a buffer's device pointer comes from cubecl's
//! `Client::get_resource` on the CUDA server, the output from `Client::empty`.
//!
//! cubecl issues its kernels on streams it creates non-blocking and does not hand out, so a
//! call is ordered against them by the host: `Client::sync` before it (the operands written,
//! the output's previous readers done) and a synchronisation of cuBLAS's own stream after it
//! (the output written before burn's next kernel reads it). Both contexts are the device's
//! primary context, so the pointers are valid in both.
//!
//! Row-major `C = op(A) op(B)` is column-major `Cᵀ = op(B)ᵀ op(A)ᵀ`: one `cublasGemmEx` with
//! the operands swapped, each leading dimension its stored row length. bf16 and f16 compute in
//! f32 (`CUBLAS_COMPUTE_32F`); f32 in TF32 (`CUBLAS_COMPUTE_32F_FAST_TF32`), as burn's
//! autotuner promotes f32 matmuls on tensor-core cards.
//!
//! A backend op cannot return an error: a failure here panics with a message starting
//! `cuBLAS:`, which the binary's panic hook turns into one `error:` line
//! (`device::failure`). A run asking for `cublas` where `libcublas` does not load is refused
//! before it starts ([`available`], `Kernels::check_on`).

use super::transposes::Transposes;
use burn::tensor::{DType, Shape};
use burn_cubecl::CubeDevice;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::cuda::CudaRuntime;
use cubecl_runtime::runtime::Runtime;
use cudarc::cublas::{CudaBlas, result, sys};
use cudarc::driver::{CudaContext, CudaStream};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

type CudaServer = <CudaRuntime as Runtime>::Server;

/// Whether `libcublas` loads on this machine; the text says how to make it load.
pub fn available() -> Result<(), String> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to `dlopen` each candidate name.
    if *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() }) {
        Ok(())
    } else {
        Err("libcublas does not load: install the CUDA toolkit's cuBLAS or `pip install \
             nvidia-cublas` and put its lib/ on LD_LIBRARY_PATH, or use model.kernels = \"fused\""
            .into())
    }
}

/// Whether [`gemm`] computes `a · b`: both on a CUDA device, in a type it is asked for here.
pub fn computes(a: &CubeTensor, b: &CubeTensor) -> bool {
    matches!(a.device, CubeDevice::Cuda(_)) && a.dtype == b.dtype && data_type(a.dtype).is_some() && available().is_ok()
}

/// cuBLAS's element and compute types for `dtype`.
fn data_type(dtype: DType) -> Option<(sys::cudaDataType, sys::cublasComputeType_t)> {
    use sys::cublasComputeType_t::{CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    use sys::cudaDataType::{CUDA_R_16BF, CUDA_R_16F, CUDA_R_32F};
    match dtype {
        DType::BF16 => Some((CUDA_R_16BF, CUBLAS_COMPUTE_32F)),
        DType::F16 => Some((CUDA_R_16F, CUBLAS_COMPUTE_32F)),
        DType::F32 => Some((CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32)),
        _ => None,
    }
}

/// One cuBLAS handle on its own stream of a device's primary context.
struct Library {
    stream: Arc<CudaStream>,
    blas: CudaBlas,
}

/// The handle for CUDA device `ordinal`, made on first use and kept for the process.
fn library(ordinal: usize) -> Arc<Mutex<Library>> {
    static LIBRARIES: OnceLock<Mutex<HashMap<usize, Arc<Mutex<Library>>>>> = OnceLock::new();
    let mut all = LIBRARIES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    all.entry(ordinal)
        .or_insert_with(|| {
            let context = CudaContext::new(ordinal).unwrap_or_else(|e| panic!("cuBLAS: CUDA device {ordinal}: {e}"));
            let stream = context.new_stream().unwrap_or_else(|e| panic!("cuBLAS: a stream on device {ordinal}: {e}"));
            let blas = CudaBlas::new(stream.clone()).unwrap_or_else(|e| panic!("cuBLAS: a handle: {e}"));
            Arc::new(Mutex::new(Library { stream, blas }))
        })
        .clone()
}

/// A buffer's device pointer, held (not freed, moved or handed out again) while the guard lives.
struct Pointer {
    ptr: u64,
    _held: Box<dyn Send>,
}

fn pointer(t: &CubeTensor) -> Pointer {
    let held = t
        .client
        .get_resource::<CudaServer>(t.handle.clone())
        .unwrap_or_else(|e| panic!("cuBLAS: a CUDA buffer's pointer: {e}"));
    Pointer { ptr: held.resource().ptr, _held: Box::new(held) }
}

/// `op(a) · op(b)` by one `cublasGemmEx` ([`computes`] must hold).
pub fn gemm(a: CubeTensor, b: CubeTensor, t: Transposes) -> CubeTensor {
    let [a, b] = [a, b].map(into_contiguous);
    let (sa, sb) = (a.meta.shape().dims::<2>(), b.meta.shape().dims::<2>());
    let (m, k, n) = t.sizes(sa, sb);
    let c = empty_device_contiguous_dtype(a.client.clone(), a.device.clone(), Shape::new([m, n]), a.dtype);
    cubecl::future::block_on(a.client.sync()).unwrap_or_else(|e| panic!("cuBLAS: waiting for burn's kernels: {e}"));
    let CubeDevice::Cuda(device) = &a.device else { unreachable!("computes() checked the device") };
    let library = library(device.index);
    let library = library.lock().unwrap_or_else(|e| e.into_inner());
    // cuBLAS runs on the context current on the calling thread (fusion may flush on any).
    library.stream.context().bind_to_thread().unwrap_or_else(|e| panic!("cuBLAS: binding the CUDA context: {e}"));
    let call = Call { m, k, n, lda: sb[1], ldb: sa[1], t, dtype: a.dtype };
    let [pa, pb, pc] = [&a, &b, &c].map(pointer);
    // SAFETY: the pointers are live buffers of the sizes the shapes give (guards held until
    // the stream is synchronised), written by nothing else: burn's streams are idle (synced).
    unsafe { call.launch(&library.blas, pb.ptr, pa.ptr, pc.ptr) }
        .unwrap_or_else(|e| panic!("cuBLAS: gemm {m}×{k}×{n}: {e}"));
    library.stream.synchronize().unwrap_or_else(|e| panic!("cuBLAS: waiting for its stream: {e}"));
    c
}

/// The sizes of one row-major product as cuBLAS's column-major call sees them.
struct Call {
    m: usize,
    k: usize,
    n: usize,
    /// The stored row length of `B` (cuBLAS's first operand) and of `A` (its second).
    lda: usize,
    ldb: usize,
    t: Transposes,
    dtype: DType,
}

impl Call {
    /// `Cᵀ = op(B)ᵀ op(A)ᵀ` (column-major) into `c`.
    ///
    /// # Safety
    /// `b`, `a`, `c` are device pointers to buffers of the call's sizes and type.
    unsafe fn launch(&self, blas: &CudaBlas, b: u64, a: u64, c: u64) -> Result<(), result::CublasError> {
        use sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
        let op = |transposed: bool| if transposed { CUBLAS_OP_T } else { CUBLAS_OP_N };
        let (element, compute) = data_type(self.dtype).expect("computes() checked the type");
        let (alpha, beta) = (1.0f32, 0.0f32);
        let int = |v: usize| i32::try_from(v).expect("a cuBLAS dimension fits in an i32");
        unsafe {
            result::gemm_ex(
                *blas.handle(),
                op(self.t.b),
                op(self.t.a),
                int(self.n),
                int(self.m),
                int(self.k),
                (&alpha as *const f32).cast::<c_void>(),
                b as *const c_void,
                element,
                int(self.lda),
                a as *const c_void,
                element,
                int(self.ldb),
                (&beta as *const f32).cast::<c_void>(),
                c as *mut c_void,
                element,
                int(self.n),
                compute,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
    }
}
