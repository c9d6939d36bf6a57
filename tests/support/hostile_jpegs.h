#pragma once
// JPEGs built to hurt a decoder, for the loader's bad-input tests:
//  - a valid small JPEG whose frame header is patched to declare a huge size (a decompression bomb
//    as far as any size check before decoding can tell);
//  - a valid progressive JPEG with 704 scans (successive approximation taken to the limit:
//    every coefficient band refined bit by bit), which libjpeg-turbo's scan limit refuses.
#include <jpeglib.h>

#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtrain::test {

// `jpeg` with the width and height of its first SOF marker replaced.
inline std::vector<uint8_t> with_declared_size(std::vector<uint8_t> jpeg, int width, int height) {
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    const uint8_t m = jpeg[i + 1];
    if (jpeg[i] == 0xFF && m >= 0xC0 && m <= 0xC2) {  // SOF0..SOF2: FF Cx len(2) P(1) Y(2) X(2)
      jpeg[i + 5] = static_cast<uint8_t>(height >> 8), jpeg[i + 6] = static_cast<uint8_t>(height);
      jpeg[i + 7] = static_cast<uint8_t>(width >> 8), jpeg[i + 8] = static_cast<uint8_t>(width);
      return jpeg;
    }
  }
  throw std::runtime_error("no SOF marker");
}

struct ThrowingJpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf escape;
};

// A greyscale progressive JPEG of width x height with 11 scans for the DC band and 11 for each of
// the 63 AC coefficients (successive approximation from bit 10 down): 704 scans, each valid.
inline std::vector<uint8_t> many_scan_progressive_jpeg(int width, int height) {
  jpeg_compress_struct cinfo;
  ThrowingJpegErrors errors;
  cinfo.err = jpeg_std_error(&errors.mgr);
  // libjpeg's default error handler exits the process; come back here instead.
  errors.mgr.error_exit = [](j_common_ptr c) {
    std::longjmp(reinterpret_cast<ThrowingJpegErrors*>(c->err)->escape, 1);
  };
  if (setjmp(errors.escape)) {
    char text[JMSG_LENGTH_MAX];
    errors.mgr.format_message(reinterpret_cast<j_common_ptr>(&cinfo), text);
    jpeg_destroy_compress(&cinfo);
    throw std::runtime_error(std::string("libjpeg: ") + text);
  }
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = 1;
  cinfo.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&cinfo);
  std::vector<jpeg_scan_info> script;
  auto add = [&](int ss, int se, int ah, int al) {
    jpeg_scan_info s{};
    s.comps_in_scan = 1;
    s.component_index[0] = 0;
    s.Ss = ss, s.Se = se, s.Ah = ah, s.Al = al;
    script.push_back(s);
  };
  for (int band = 0; band < 64; ++band) {
    add(band, band, 0, 10);
    for (int al = 9; al >= 0; --al) add(band, band, al + 1, al);
  }
  cinfo.scan_info = script.data();
  cinfo.num_scans = static_cast<int>(script.size());
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<uint8_t> row(static_cast<size_t>(width));
  while (cinfo.next_scanline < cinfo.image_height) {
    for (int x = 0; x < width; ++x)
      row[static_cast<size_t>(x)] = static_cast<uint8_t>((x * 7 + cinfo.next_scanline * 3) & 255);
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&cinfo, rows, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> out(buffer, buffer + size);
  std::free(buffer);
  return out;
}

}  // namespace dtrain::test
