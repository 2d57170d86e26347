//! JPEG round trips made as Pillow makes them: libjpeg-turbo's codec (MozJPEG's C code with its `JCP_FASTEST`
//! profile, which is libjpeg-turbo's defaults: baseline, Huffman tables of Annex K, no trellis quantisation, no
//! progressive scans, the standard Annex K quantisation tables scaled by quality and clamped to 255), encoded
//! with the slow integer DCT, chroma subsampled 2x2 for RGB and one component for grey; decoded with the slow
//! integer IDCT and fancy upsampling, libjpeg's defaults, as Pillow decodes.
//!
//! libjpeg reports a fatal error by calling `error_exit`, which must not return; here it unwinds (MozJPEG is
//! compiled with `-fexceptions` for this) and the round trip catches it as an error. The buffers are our own,
//! so an error means a bug or no memory, never bad input.

use std::ffi::{c_int, c_ulong};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use mozjpeg_sys as ffi;

/// Encodes `pixels` (`width` x `height`, 1 or 3 interleaved 8-bit channels) as a JPEG at `quality` and decodes
/// it again into as many channels.
pub(crate) fn round_trip(
    pixels: &[u8],
    width: u32,
    height: u32,
    channels: usize,
    quality: u8,
) -> Result<Vec<u8>, String> {
    let row = width as usize * channels;
    if !matches!(channels, 1 | 3)
        || width == 0
        || height == 0
        || pixels.len() != row * height as usize
    {
        return Err(format!(
            "{width} x {height} pixels of {channels} channels do not fit {} bytes",
            pixels.len()
        ));
    }
    catch_unwind(AssertUnwindSafe(|| {
        let jpeg = encode(pixels, width, height, channels, quality);
        decode(&jpeg, width, height, channels)
    }))
    .map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| "libjpeg failed".into())
    })
}

fn color_space(channels: usize) -> ffi::J_COLOR_SPACE {
    if channels == 1 {
        ffi::J_COLOR_SPACE::JCS_GRAYSCALE
    } else {
        ffi::J_COLOR_SPACE::JCS_RGB
    }
}

/// An error manager whose `error_exit` unwinds with libjpeg's message and whose warnings are silent.
fn error_mgr() -> Box<ffi::jpeg_error_mgr> {
    // SAFETY: an all-zero jpeg_error_mgr is what jpeg_std_error expects to fill in (MozJPEG's own Rust wrapper
    // does the same).
    let mut err: Box<ffi::jpeg_error_mgr> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: err is a valid, exclusively borrowed jpeg_error_mgr.
    unsafe { ffi::jpeg_std_error(&mut err) };
    err.error_exit = Some(error_exit);
    err.emit_message = Some(silent);
    err
}

extern "C-unwind" fn error_exit(cinfo: &mut ffi::jpeg_common_struct) {
    type Format = unsafe extern "C-unwind" fn(&mut ffi::jpeg_common_struct, &mut [u8; 80]);
    let mut buffer = [0u8; 80];
    // SAFETY: cinfo.err points at the error manager set up by error_mgr, alive for the whole call. The binding
    // declares format_message's buffer `&[u8; 80]`, but libjpeg writes its message into it: it is called
    // through the same function type with `&mut`, as MozJPEG's own Rust wrapper does.
    let message = unsafe {
        match cinfo.err.as_ref().and_then(|e| e.format_message) {
            Some(format) => {
                let format: Format = std::mem::transmute(format);
                format(cinfo, &mut buffer);
                let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
                String::from_utf8_lossy(&buffer[..end]).into_owned()
            }
            None => "libjpeg failed".into(),
        }
    };
    resume_unwind(Box::new(format!("libjpeg: {message}")));
}

extern "C-unwind" fn silent(_cinfo: &mut ffi::jpeg_common_struct, _level: c_int) {}

/// A compressor that is destroyed however the encoding ends.
struct Compress(Box<ffi::jpeg_compress_struct>);

impl Drop for Compress {
    fn drop(&mut self) {
        // SAFETY: created by jpeg_create_compress before this guard existed; destroying is valid in any state.
        unsafe { ffi::jpeg_destroy_compress(&mut self.0) };
    }
}

/// The buffer libjpeg's memory destination allocates with malloc, freed however the encoding ends.
struct MemDest {
    buffer: *mut u8,
    size: c_ulong,
}

impl Drop for MemDest {
    fn drop(&mut self) {
        // SAFETY: null or a pointer libjpeg got from malloc and handed over through jpeg_mem_dest.
        unsafe { libc::free(self.buffer.cast()) };
    }
}

fn encode(pixels: &[u8], width: u32, height: u32, channels: usize, quality: u8) -> Vec<u8> {
    let row = width as usize * channels;
    let mut err = error_mgr();
    let mut dest = MemDest {
        buffer: std::ptr::null_mut(),
        size: 0,
    };
    // SAFETY: libjpeg's documented call sequence on a zeroed struct whose `err` is set first; `err` and `dest`
    // are declared before `c`, so they outlive it, and neither moves while libjpeg holds pointers to them.
    // Every row pointer points at `row` bytes of `pixels`.
    unsafe {
        let mut c = Compress(Box::new(std::mem::zeroed()));
        c.0.common.err = &mut *err;
        ffi::jpeg_create_compress(&mut *c.0);
        ffi::jpeg_mem_dest(&mut c.0, &mut dest.buffer, &mut dest.size);
        c.0.image_width = width;
        c.0.image_height = height;
        c.0.input_components = channels as c_int;
        c.0.in_color_space = color_space(channels);
        // MozJPEG's default profile is its own (trellis, progressive, other tables); this one is libjpeg-turbo's.
        ffi::jpeg_c_set_int_param(
            &mut c.0,
            ffi::J_INT_PARAM::JINT_COMPRESS_PROFILE,
            ffi::JINT_COMPRESS_PROFILE_VALUE::JCP_FASTEST as c_int,
        );
        ffi::jpeg_set_defaults(&mut c.0);
        // Pillow forces baseline tables (every entry at most 255).
        ffi::jpeg_set_quality(&mut c.0, c_int::from(quality), 1);
        ffi::jpeg_start_compress(&mut c.0, 1);
        for line in pixels.chunks_exact(row) {
            let rows = [line.as_ptr()];
            ffi::jpeg_write_scanlines(&mut c.0, rows.as_ptr(), 1);
        }
        ffi::jpeg_finish_compress(&mut c.0);
        drop(c);
        std::slice::from_raw_parts(dest.buffer, dest.size as usize).to_vec()
    }
}

/// A decompressor that is destroyed however the decoding ends.
struct Decompress(Box<ffi::jpeg_decompress_struct>);

impl Drop for Decompress {
    fn drop(&mut self) {
        // SAFETY: created by jpeg_create_decompress before this guard existed.
        unsafe { ffi::jpeg_destroy_decompress(&mut self.0) };
    }
}

fn decode(jpeg: &[u8], width: u32, height: u32, channels: usize) -> Vec<u8> {
    let row = width as usize * channels;
    let mut err = error_mgr();
    let mut out = vec![0u8; row * height as usize];
    // SAFETY: as in encode; `jpeg` outlives `d`. The output size is checked against what was encoded before any
    // row is written, and each row pointer points at `row` bytes of `out`.
    unsafe {
        let mut d = Decompress(Box::new(std::mem::zeroed()));
        d.0.common.err = &mut *err;
        ffi::jpeg_create_decompress(&mut *d.0);
        ffi::jpeg_mem_src(&mut d.0, jpeg.as_ptr(), jpeg.len() as c_ulong);
        ffi::jpeg_read_header(&mut d.0, 1);
        // libjpeg's defaults, set again so nothing above changes them: the slow integer IDCT, fancy upsampling.
        d.0.out_color_space = color_space(channels);
        d.0.dct_method = ffi::J_DCT_METHOD::JDCT_ISLOW;
        d.0.do_fancy_upsampling = 1;
        ffi::jpeg_start_decompress(&mut d.0);
        let size = (d.0.output_width, d.0.output_height, d.0.output_components);
        if size != (width, height, channels as c_int) {
            resume_unwind(Box::new(format!(
                "libjpeg decoded {size:?}, expected ({width}, {height}, {channels})"
            )));
        }
        for line in out.chunks_exact_mut(row) {
            let mut rows = [line.as_mut_ptr()];
            ffi::jpeg_read_scanlines(&mut d.0, rows.as_mut_ptr(), 1);
        }
        ffi::jpeg_finish_decompress(&mut d.0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_image_comes_back_flat_and_sizes_are_checked() {
        for channels in [1, 3] {
            let pixels = vec![100u8; 9 * 7 * channels];
            let back = round_trip(&pixels, 9, 7, channels, 75).unwrap();
            assert_eq!(back.len(), pixels.len());
            assert!(back.iter().all(|&v| v.abs_diff(100) <= 1), "{back:?}");
        }
        assert!(round_trip(&[0; 10], 3, 3, 1, 50).is_err());
        assert!(round_trip(&[0; 8], 2, 2, 2, 50).is_err());
    }
}
