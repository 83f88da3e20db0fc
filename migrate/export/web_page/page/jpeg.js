// JPEG bytes -> RGB pixels as TensorFlow decodes them (tf.io.decode_jpeg, the decoder the TF1
// graph's exporters put in front of the graph and `predict` uses): libjpeg-turbo with the fast
// integer IDCT (TensorFlow maps its default dct_method "" to JDCT_IFAST) and fancy upsampling of
// the chroma planes, as `ssd_mobilenet/formats/images.py` gets it from simplejpeg in Python.
//
// The browser's own decoder (a canvas, createImageBitmap) differs: it uses the accurate IDCT and
// moves detections by ~2e-4 (docs/guides/deploy.md). libjpeg-turbo comes compiled to WebAssembly
// by the npm package @cwasm/jpeg-turbo (its TurboJPEG functions, called here directly: that
// package's own wrapper is for Node.js and decodes with the accurate IDCT).

const TJPF_RGB = 0;
const TJFLAG_FASTDCT = 2048;       // JDCT_IFAST, as TensorFlow
const TJFLAG_STOPONWARNING = 8192; // a truncated or corrupt file is an error, as in TensorFlow
// Fancy upsampling is TurboJPEG's default (TJFLAG_FASTUPSAMPLE, 256, would turn it off).
const FLAGS = TJFLAG_FASTDCT | TJFLAG_STOPONWARNING;

export class JpegError extends Error {}

// libjpeg reports errors by longjmp, which this build leaves to its host: a JavaScript throw that
// unwinds the WebAssembly stack. The instance is then replaced (its heap may hold what the
// interrupted call allocated).
class LongJump extends Error {}

export class JpegDecoder {
  static async load(url) {
    const response = await fetch(url);
    if (!response.ok) throw new JpegError(`${url}: HTTP ${response.status}`);
    return new JpegDecoder(await WebAssembly.compile(await response.arrayBuffer()));
  }

  constructor(module) {
    this.module = module;
    this.instance = null;
  }

  _exports() {
    if (!this.instance) {
      const fail = (name) => () => { throw new Error(`libjpeg-turbo called ${name}`); };
      this.instance = new WebAssembly.Instance(this.module, {
        env: { setjmp: () => 0, longjmp: () => { throw new LongJump("libjpeg error"); } },
        wasi_snapshot_preview1: {
          environ_sizes_get: () => 0, environ_get: fail("environ_get"), proc_exit: fail("proc_exit"),
          fd_close: fail("fd_close"), fd_seek: fail("fd_seek"), fd_write: fail("fd_write"),
        },
      });
    }
    return this.instance.exports;
  }

  // bytes: Uint8Array of a JPEG file -> {width, height, rgb: Uint8Array [height * width * 3]}.
  decode(bytes) {
    const e = this._exports();
    const input = e.malloc(bytes.length);
    const header = e.malloc(16);
    let handle = 0, output = 0;
    try {
      new Uint8Array(e.memory.buffer, input, bytes.length).set(bytes);
      handle = e.tjInitDecompress();
      if (!handle) throw new JpegError("cannot start the JPEG decoder");
      if (e.tjDecompressHeader3(handle, input, bytes.length, header, header + 4, header + 8, header + 12) !== 0) {
        throw new JpegError("not a JPEG file this decoder reads (its header is corrupt)");
      }
      const [width, height] = new Int32Array(e.memory.buffer, header, 2);
      output = e.malloc(width * height * 3);
      if (!output) throw new JpegError(`a ${width}x${height} photo does not fit in the decoder's memory`);
      if (e.tjDecompress2(handle, input, bytes.length, output, width, width * 3, height, TJPF_RGB, FLAGS) !== 0) {
        throw new JpegError("the JPEG data is corrupt or truncated");
      }
      const rgb = new Uint8Array(width * height * 3);
      rgb.set(new Uint8Array(e.memory.buffer, output, rgb.length));
      return { width, height, rgb };
    } catch (error) {
      if (error instanceof LongJump) {
        this.instance = null;
        throw new JpegError("the JPEG data is corrupt or truncated");
      }
      throw error;
    } finally {
      if (this.instance) {
        if (output) e.free(output);
        if (handle) e.tjDestroy(handle);
        e.free(header);
        e.free(input);
      }
    }
  }
}

export function isJpeg(bytes) {
  return bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff;
}
