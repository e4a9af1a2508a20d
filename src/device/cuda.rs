//! The CUDA driver, asked directly before burn touches it: whether `libcuda.so.1` loads,
//! initialises and has the device asked for, and that device's name and memory. burn's CUDA
//! runtime panics in its engine thread on each of these failures; asking first turns them
//! into one `error:` line. The driver is opened with `dlopen`, so every build (with or
//! without the `cuda` feature) can ask, and a machine without a driver is told so.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

/// One CUDA device as the driver describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaDevice {
    pub index: usize,
    pub name: String,
    pub memory_bytes: u64,
}

/// Why the driver cannot give the device asked for; `Display` is the `error:` line's text.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CudaError {
    #[error(
        "device `cuda`: no CUDA driver ({0}); install the NVIDIA driver, or pick another device: \
         --set run.device='\"vulkan\"' (a build with --features vulkan) or '\"cpu\"'"
    )]
    NoDriver(String),
    #[error(
        "device `cuda`: the CUDA driver failed to start (cuInit: error {0}); check `nvidia-smi`, \
         or pick another device: --set run.device='\"cpu\"'"
    )]
    Init(i32),
    #[error(
        "device `cuda:{index}`: the CUDA driver sees {count} device(s); pick `cuda:0` to \
         `cuda:{last}`, or another device",
        last = count.saturating_sub(1)
    )]
    NoDevice { index: usize, count: usize },
    #[error("device `cuda:{0}`: the CUDA driver sees no device; check `nvidia-smi`, or pick `cpu`")]
    NoDevices(usize),
    #[error(
        "device `cuda`: no CUDA toolkit headers ({0}): burn compiles its kernels with NVRTC against \
         them; install the CUDA toolkit, or set CUDA_PATH to the directory holding include/"
    )]
    NoToolkit(String),
}

/// The CUDA toolkit burn's runtime compiles its kernels against (NVRTC with `CUDA/include`),
/// searched as cubecl-cuda searches it: `CUDA_PATH`, `/usr/local/cuda`, `/opt/cuda`, `/usr`
/// when `/usr/bin/nvcc` exists. Its headers must be there (`include/cuda_fp16.h`).
pub fn toolkit() -> Result<std::path::PathBuf, CudaError> {
    use std::path::{Path, PathBuf};
    let found = match std::env::var_os("CUDA_PATH") {
        Some(p) => Some(PathBuf::from(p)),
        None => ["/usr/local/cuda", "/opt/cuda"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .or_else(|| Path::new("/usr/bin/nvcc").exists().then(|| PathBuf::from("/usr"))),
    };
    let Some(root) = found else {
        return Err(CudaError::NoToolkit("no CUDA_PATH, /usr/local/cuda, /opt/cuda or /usr/bin/nvcc".into()));
    };
    match root.join("include/cuda_fp16.h").exists() {
        true => Ok(root),
        false => Err(CudaError::NoToolkit(format!("{} has no include/cuda_fp16.h", root.display()))),
    }
}

type CuInit = unsafe extern "C" fn(c_uint) -> c_int;
type CuDeviceGetCount = unsafe extern "C" fn(*mut c_int) -> c_int;
type CuDeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type CuDeviceGetName = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
type CuDeviceTotalMem = unsafe extern "C" fn(*mut usize, c_int) -> c_int;

/// The driver library, opened once per call (`dlopen` counts references; it is never closed,
/// as burn opens the same library next).
struct Driver(*mut c_void);

impl Driver {
    fn open() -> Result<Self, CudaError> {
        // SAFETY: dlopen with a constant, NUL-terminated name.
        let h = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            return Err(CudaError::NoDriver(dl_error("libcuda.so.1 could not be loaded")));
        }
        Ok(Driver(h))
    }

    /// The driver's function `name`, as the function type `F` the caller names.
    fn symbol<F: Copy>(&self, name: &CStr) -> Result<F, CudaError> {
        // SAFETY: dlsym on an open handle; the pointer is reinterpreted as the function type
        // of the CUDA driver API's documented signature, which the caller names.
        let p = unsafe { libc::dlsym(self.0, name.as_ptr()) };
        if p.is_null() {
            return Err(CudaError::NoDriver(dl_error(&format!("{name:?} is missing from libcuda.so.1"))));
        }
        assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
        Ok(unsafe { std::mem::transmute_copy(&p) })
    }
}

fn dl_error(fallback: &str) -> String {
    // SAFETY: dlerror returns a thread-local C string or null.
    let e = unsafe { libc::dlerror() };
    if e.is_null() { fallback.into() } else { unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned() }
}

/// Device `index` as the driver sees it, or why it cannot be used (the toolkit's headers
/// included: see [`toolkit`]).
pub fn probe(index: usize) -> Result<CudaDevice, CudaError> {
    let device = driver_device(index)?;
    toolkit()?;
    Ok(device)
}

/// Device `index` as the driver sees it.
fn driver_device(index: usize) -> Result<CudaDevice, CudaError> {
    let d = Driver::open()?;
    let init: CuInit = d.symbol(c"cuInit")?;
    // SAFETY (here and below): calls of the CUDA driver API with valid out-pointers.
    match unsafe { init(0) } {
        0 => {}
        100 => return Err(CudaError::NoDevices(index)), // CUDA_ERROR_NO_DEVICE
        e => return Err(CudaError::Init(e)),
    }
    let get_count: CuDeviceGetCount = d.symbol(c"cuDeviceGetCount")?;
    let mut count: c_int = 0;
    if unsafe { get_count(&mut count) } != 0 || count <= 0 {
        return Err(CudaError::NoDevices(index));
    }
    if index >= count as usize {
        return Err(CudaError::NoDevice { index, count: count as usize });
    }
    describe(&d, index)
}

fn describe(d: &Driver, index: usize) -> Result<CudaDevice, CudaError> {
    let get: CuDeviceGet = d.symbol(c"cuDeviceGet")?;
    let get_name: CuDeviceGetName = d.symbol(c"cuDeviceGetName")?;
    let total_mem: CuDeviceTotalMem = d.symbol(c"cuDeviceTotalMem_v2")?;
    let mut dev: c_int = 0;
    let mut name = [0 as c_char; 256];
    let mut bytes: usize = 0;
    unsafe {
        let e = get(&mut dev, index as c_int);
        if e != 0 {
            return Err(CudaError::Init(e));
        }
        get_name(name.as_mut_ptr(), name.len() as c_int, dev);
        total_mem(&mut bytes, dev);
    }
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
    Ok(CudaDevice { index, name, memory_bytes: bytes as u64 })
}

/// The name of the first CUDA device, where a driver answers (for the stated peak of a
/// `vulkan` or `wgpu` device on an NVIDIA machine too).
pub fn first_device_name() -> Option<String> {
    driver_device(0).ok().map(|d| d.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine without the driver the answer is the one-line error that names the fix;
    /// with one, the device it names exists and has memory. Either way: no panic.
    #[test]
    fn the_driver_answers_with_a_device_or_a_line_naming_the_fix() {
        match probe(0) {
            Ok(d) => assert!(d.memory_bytes > 0 && !d.name.is_empty(), "{d:?}"),
            Err(e) => {
                let line = e.to_string();
                assert!(line.starts_with("device `cuda"), "{line}");
                assert!(!line.contains('\n'), "{line}");
            }
        }
        if driver_device(0).is_err() {
            assert!(matches!(
                driver_device(0),
                Err(CudaError::NoDriver(_) | CudaError::NoDevices(_) | CudaError::Init(_))
            ));
        }
    }

    #[test]
    fn an_index_past_the_last_device_names_the_range() {
        let e = CudaError::NoDevice { index: 3, count: 2 }.to_string();
        assert!(e.contains("`cuda:3`") && e.contains("`cuda:0` to `cuda:1`"), "{e}");
    }
}
