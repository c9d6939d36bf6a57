#include "tests/support/realistic_images.h"

#include <turbojpeg.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>

#include "runtime/base/error.h"

namespace dtrain::test {
namespace {

constexpr float kPi = 3.14159265358979f;
constexpr double kKiB = 1024.0;

// splitmix64: cheap, well-mixed 64-bit values for seeds, lattices and per-pixel noise.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
  float symmetric() { return 2.0f * uniform() - 1.0f; }                                // [-1, 1)
};

uint64_t hash_of(std::initializer_list<uint64_t> parts) {
  SplitMix h{0x5EEDull};
  for (uint64_t p : parts) h.state ^= SplitMix{p}.next() + h.next();
  return h.next();
}

float fraction(float x) {
  return x - std::floor(x);
}
float smooth(float t) {
  return t * t * (3.0f - 2.0f * t);
}

// Hue in [0, 1) (wraps), saturation and value in [0, 1] -> RGB in [0, 255].
std::array<float, 3> hsv(float h, float s, float v) {
  h = fraction(h) * 6.0f;
  const int sector = static_cast<int>(h) % 6;
  const float f = h - std::floor(h);
  const float p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  std::array<float, 3> rgb;
  switch (sector) {
    case 0: rgb = {v, t, p}; break;
    case 1: rgb = {q, v, p}; break;
    case 2: rgb = {p, v, t}; break;
    case 3: rgb = {p, q, v}; break;
    case 4: rgb = {t, p, v}; break;
    default: rgb = {v, p, q}; break;
  }
  for (float& c : rgb) c *= 255.0f;
  return rgb;
}

// What every image of a class shares. Hues alone would blur over 100+ classes, so the object
// shape and the stripe direction and period on the objects vary with the label too.
struct ClassLook {
  float hue;             // of the objects
  float background_hue;  // of the scene around them
  int sides;             // 0: ellipse, else a convex polygon with this many sides
  float stripe_angle;    // radians
  float stripe_period;   // pixels
  float texture_angle;   // direction of the streaky texture octave
};

ClassLook class_look(uint64_t seed, int label) {
  SplitMix r{hash_of({seed, 0xC1A55ull, static_cast<uint64_t>(label)})};
  static const int kSides[] = {0, 3, 4, 5, 6};
  ClassLook look;
  look.hue = fraction(static_cast<float>(label) * 0.6180339887f + 0.05f * r.uniform());
  look.background_hue = fraction(look.hue + 0.2f + 0.6f * r.uniform());
  look.sides = kSides[label % 5];
  look.stripe_angle = (static_cast<float>((label / 5) % 8) + 0.2f * r.symmetric()) * kPi / 8.0f;
  look.stripe_period = 5.0f + static_cast<float>((label * 7) % 11) * 1.6f;
  look.texture_angle = kPi * r.uniform();
  return look;
}

// Smooth 2-D value noise in [-1, 1]: random values on a lattice of `cell` pixels, interpolated
// with smoothstep weights. Separable lookups make it a few nanoseconds a pixel.
class ValueNoise {
 public:
  ValueNoise(int width, int height, float cell, SplitMix& r)
      : nx_(static_cast<int>(width / cell) + 3), ix_(width), tx_(width), iy_(height), ty_(height) {
    const int ny = static_cast<int>(height / cell) + 3;
    lattice_.resize(static_cast<size_t>(nx_) * ny);
    for (float& v : lattice_) v = r.symmetric();
    const float ox = r.uniform(), oy = r.uniform();
    for (int x = 0; x < width; ++x) {
      const float f = static_cast<float>(x) / cell + ox;
      ix_[x] = static_cast<int>(f);
      tx_[x] = smooth(f - static_cast<float>(ix_[x]));
    }
    for (int y = 0; y < height; ++y) {
      const float f = static_cast<float>(y) / cell + oy;
      iy_[y] = static_cast<int>(f);
      ty_[y] = smooth(f - static_cast<float>(iy_[y]));
    }
  }
  // Adds amplitude * noise to row y of `out` (width floats), times `weight` per pixel when given.
  void add_row(int y, float amplitude, float* out, const float* weight = nullptr) const {
    const float* a = &lattice_[static_cast<size_t>(iy_[y]) * nx_];
    const float* b = a + nx_;
    const float ty = ty_[y];
    for (size_t x = 0; x < ix_.size(); ++x) {
      const int i = ix_[x];
      const float top = a[i] + (a[i + 1] - a[i]) * tx_[x];
      const float bottom = b[i] + (b[i + 1] - b[i]) * tx_[x];
      const float v = amplitude * (top + (bottom - top) * ty);
      out[x] += weight ? v * weight[x] : v;
    }
  }

 private:
  int nx_;
  std::vector<float> lattice_;
  std::vector<int> ix_;
  std::vector<float> tx_;
  std::vector<int> iy_;
  std::vector<float> ty_;
};

// Value noise stretched along `angle`: streaks like grass, hair or bark.
float streak_noise(const std::vector<float>& lattice, int n, float u, float v) {
  const int iu = static_cast<int>(u), iv = static_cast<int>(v);
  const float tu = smooth(u - static_cast<float>(iu)), tv = smooth(v - static_cast<float>(iv));
  const float* a = &lattice[static_cast<size_t>(iv) * n + iu];
  const float* b = a + n;
  const float top = a[0] + (a[1] - a[0]) * tu, bottom = b[0] + (b[1] - b[0]) * tu;
  return top + (bottom - top) * tv;
}

// The image's size, drawn to look like ImageNet's: most files 500 px on the long side (500x375 and
// 500x333 the most common), 85% landscape, 10% portrait, 5% square; mean about 500x390.
void draw_size(std::mt19937_64& rng, int* width, int* height) {
  std::uniform_real_distribution<double> u(0, 1);
  const double orientation = u(rng), shape = u(rng);
  double aspect = shape < 0.58 ? 4.0 / 3 : shape < 0.88 ? 3.0 / 2 : shape < 0.94 ? 16.0 / 9 : 5.0 / 4;
  if (orientation >= 0.95) aspect = 1.0;  // square
  double shorter;
  if (u(rng) < 0.6) {
    shorter = 500.0 / aspect;
  } else {
    std::lognormal_distribution<double> side(std::log(370.0), 0.3);
    shorter = std::clamp(side(rng), 200.0, 800.0);
  }
  const int s = static_cast<int>(std::lround(shorter)), l = static_cast<int>(std::lround(shorter * aspect));
  const bool portrait = orientation >= 0.85 && orientation < 0.95;
  *width = portrait ? s : l;
  *height = portrait ? l : s;
}

// One convex shape (ellipse or polygon) painted with antialiased edges.
struct Shape {
  float cx, cy, rx, ry, angle;
  int sides;
  std::array<float, 3> colour;
  float shade_dx, shade_dy;  // lighting gradient across the shape, per radius
  float stripe_amp = 0, stripe_angle = 0, stripe_period = 1, stripe_phase = 0;

  // Signed distance in pixels, roughly (negative inside).
  float distance(float x, float y) const {
    const float c = std::cos(angle), s = std::sin(angle);
    const float u = ((x - cx) * c + (y - cy) * s) / rx, v = (-(x - cx) * s + (y - cy) * c) / ry;
    const float scale = std::min(rx, ry);
    if (sides == 0) return (std::sqrt(u * u + v * v) - 1.0f) * scale;
    float d = -1e9f;
    for (int k = 0; k < sides; ++k) {
      const float a = 2 * kPi * static_cast<float>(k) / static_cast<float>(sides);
      d = std::max(d, u * std::cos(a) + v * std::sin(a) - std::cos(kPi / static_cast<float>(sides)));
    }
    return d * scale;
  }

  void paint(float* rgb, int width, int height) const {
    const float reach = std::max(rx, ry) + 2;
    const int x0 = std::max(0, static_cast<int>(cx - reach)), x1 = std::min(width, static_cast<int>(cx + reach) + 1);
    const int y0 = std::max(0, static_cast<int>(cy - reach)), y1 = std::min(height, static_cast<int>(cy + reach) + 1);
    const float sc = std::cos(stripe_angle), ss = std::sin(stripe_angle);
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) {
        const float fx = static_cast<float>(x), fy = static_cast<float>(y);
        const float alpha = std::clamp(0.5f - distance(fx, fy), 0.0f, 1.0f);
        if (alpha <= 0) continue;
        const float light = 1.0f + shade_dx * (fx - cx) / rx + shade_dy * (fy - cy) / ry;
        const float stripe = stripe_amp * std::sin(2 * kPi * (fx * sc + fy * ss) / stripe_period + stripe_phase);
        float* p = rgb + (static_cast<size_t>(y) * width + x) * 3;
        for (int c = 0; c < 3; ++c) p[c] += alpha * (colour[c] * light + stripe - p[c]);
      }
    }
  }
};

// A straight stroke (branch, wire, horizon line) of `thickness` pixels.
void paint_line(float* rgb, int width, int height, float x0, float y0, float x1, float y1, float thickness,
                const std::array<float, 3>& colour) {
  const float dx = x1 - x0, dy = y1 - y0, length2 = std::max(dx * dx + dy * dy, 1e-3f);
  const int bx0 = std::max(0, static_cast<int>(std::min(x0, x1) - thickness - 1));
  const int bx1 = std::min(width, static_cast<int>(std::max(x0, x1) + thickness + 2));
  const int by0 = std::max(0, static_cast<int>(std::min(y0, y1) - thickness - 1));
  const int by1 = std::min(height, static_cast<int>(std::max(y0, y1) + thickness + 2));
  for (int y = by0; y < by1; ++y) {
    for (int x = bx0; x < bx1; ++x) {
      const float px = static_cast<float>(x) - x0, py = static_cast<float>(y) - y0;
      const float t = std::clamp((px * dx + py * dy) / length2, 0.0f, 1.0f);
      const float ex = px - t * dx, ey = py - t * dy;
      const float alpha = std::clamp(0.5f * thickness + 0.5f - std::sqrt(ex * ex + ey * ey), 0.0f, 1.0f);
      if (alpha <= 0) continue;
      float* p = rgb + (static_cast<size_t>(y) * width + x) * 3;
      for (int c = 0; c < 3; ++c) p[c] += alpha * (colour[c] - p[c]);
    }
  }
}

// The scene without fine detail: a smooth colour field, then the objects and strokes.
void paint_base(const ClassLook& look, std::mt19937_64& rng, int width, int height, std::vector<float>* base) {
  std::uniform_real_distribution<float> u(0, 1);
  std::normal_distribution<float> jitter(0, 1);
  base->assign(static_cast<size_t>(width) * height * 3, 0.0f);
  // Colour field: a coarse grid of colours around the background hue, brighter towards the top.
  const int gx = 3 + static_cast<int>(rng() % 4), gy = 3 + static_cast<int>(rng() % 3);
  std::vector<std::array<float, 3>> grid(static_cast<size_t>(gx + 1) * (gy + 1));
  for (int j = 0; j <= gy; ++j) {
    for (int i = 0; i <= gx; ++i) {
      const float hue = look.background_hue + 0.05f * jitter(rng) + (u(rng) < 0.2f ? 0.5f : 0.0f);
      const float value = std::clamp(0.3f + 0.5f * u(rng) + 0.2f * (1.0f - static_cast<float>(j) / gy), 0.05f, 1.0f);
      grid[static_cast<size_t>(j) * (gx + 1) + i] = hsv(hue, 0.15f + 0.5f * u(rng), value);
    }
  }
  for (int y = 0; y < height; ++y) {
    const float fy = static_cast<float>(y) * gy / static_cast<float>(height);
    const int j = std::min(static_cast<int>(fy), gy - 1);
    const float ty = smooth(fy - static_cast<float>(j));
    for (int x = 0; x < width; ++x) {
      const float fx = static_cast<float>(x) * gx / static_cast<float>(width);
      const int i = std::min(static_cast<int>(fx), gx - 1);
      const float tx = smooth(fx - static_cast<float>(i));
      const auto& a = grid[static_cast<size_t>(j) * (gx + 1) + i];
      const auto& b = grid[static_cast<size_t>(j) * (gx + 1) + i + 1];
      const auto& c = grid[static_cast<size_t>(j + 1) * (gx + 1) + i];
      const auto& d = grid[static_cast<size_t>(j + 1) * (gx + 1) + i + 1];
      float* p = base->data() + (static_cast<size_t>(y) * width + x) * 3;
      for (int k = 0; k < 3; ++k) {
        const float top = a[k] + (b[k] - a[k]) * tx, bottom = c[k] + (d[k] - c[k]) * tx;
        p[k] = top + (bottom - top) * ty;
      }
    }
  }
  const float side = static_cast<float>(std::min(width, height));
  auto shape_at = [&](float radius, int sides, std::array<float, 3> colour) {
    Shape s;
    s.cx = u(rng) * width;
    s.cy = u(rng) * height;
    s.rx = radius * (0.7f + 0.6f * u(rng));
    s.ry = radius * (0.7f + 0.6f * u(rng));
    s.angle = kPi * u(rng);
    s.sides = sides;
    s.colour = colour;
    s.shade_dx = 0.25f * jitter(rng);
    s.shade_dy = 0.25f * jitter(rng);
    return s;
  };
  // Distractors: other shapes in other hues, less saturated.
  const int distractors = static_cast<int>(rng() % 4);
  for (int k = 0; k < distractors; ++k) {
    static const int kSides[] = {0, 3, 4, 5, 6};
    shape_at(side * (0.06f + 0.12f * u(rng)), kSides[rng() % 5],
             hsv(u(rng), 0.1f + 0.4f * u(rng), 0.2f + 0.7f * u(rng)))
        .paint(base->data(), width, height);
  }
  // The class's objects: its shape and hue, striped in its direction and period.
  const int objects = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < objects; ++k) {
    Shape s = shape_at(side * (0.15f + 0.2f * u(rng)), look.sides,
                       hsv(look.hue + 0.025f * jitter(rng), 0.55f + 0.4f * u(rng), 0.4f + 0.55f * u(rng)));
    s.stripe_amp = 15.0f + 20.0f * u(rng);
    s.stripe_angle = look.stripe_angle + 0.1f * jitter(rng);
    s.stripe_period = look.stripe_period * (0.85f + 0.3f * u(rng));
    s.stripe_phase = 2 * kPi * u(rng);
    s.paint(base->data(), width, height);
  }
  const int strokes = static_cast<int>(rng() % 7);
  for (int k = 0; k < strokes; ++k) {
    const float x0 = u(rng) * width, y0 = u(rng) * height;
    const float length = side * (0.1f + 0.5f * u(rng)), angle = 2 * kPi * u(rng);
    paint_line(base->data(), width, height, x0, y0, x0 + length * std::cos(angle), y0 + length * std::sin(angle),
               1.0f + 4.0f * u(rng) * u(rng), hsv(u(rng), 0.3f * u(rng), u(rng) < 0.5f ? 0.1f : 0.9f));
  }
}

// 65536 standard normal samples, made once: per-pixel noise indexes it with 16 random bits.
const std::vector<float>& gaussian_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    std::mt19937 g(12345);
    std::normal_distribution<float> n(0, 1);
    for (float& v : t) v = n(g);
    return t;
  }();
  return table;
}

// A sharp step from -1 to 1 around 0: thresholded smooth noise gives crisp-edged blobs and streaks
// (leaves, gravel, grass), whose edges spread energy over all frequencies as real texture does.
float soft_sign(float x) {
  return x / (std::fabs(x) + 0.12f);
}

// Texture whose strength varies over the image (smooth sky beside busy foliage). A slow colour
// variation goes into `base`; the rest into `detail`, which the size search scales as a whole:
// coarse, mid- and high-frequency value noise, crisp blobs, a streaky octave in the class's texture
// direction (grass, hair, bark) and mild sensor noise. With all texture scaled, a small amplitude
// always brings a file under 150 KiB, however large the image.
void paint_texture(const ClassLook& look, SplitMix& r, int width, int height, std::vector<float>* base,
                   std::vector<float>* detail) {
  detail->assign(static_cast<size_t>(width) * height * 3, 0.0f);
  const float side = static_cast<float>(std::min(width, height));
  const ValueNoise mask(width, height, side / 2.5f, r);
  const ValueNoise chroma(width, height, 14.0f, r);
  static const float kCoarseCells[] = {24.0f, 10.0f}, kCoarseAmps[] = {12.0f, 9.0f};
  static const float kFineCells[] = {3.0f, 1.5f}, kFineAmps[] = {1.0f, 20.0f};
  std::vector<ValueNoise> coarse, fine;
  for (float cell : kCoarseCells) coarse.emplace_back(width, height, cell, r);
  for (float cell : kFineCells) fine.emplace_back(width, height, cell, r);
  // The streak lattice covers the image rotated by any angle.
  const float cu = 12.0f, cv = 1.8f, diagonal = std::sqrt(static_cast<float>(width * width + height * height));
  const int nu = static_cast<int>(2 * diagonal / cu) + 4, nv = static_cast<int>(2 * diagonal / cv) + 4;
  std::vector<float> streaks(static_cast<size_t>(nu) * nv);
  for (float& v : streaks) v = r.symmetric();
  const float sc = std::cos(look.texture_angle), ss = std::sin(look.texture_angle);
  const float blob_amp = 60.0f, blob_chroma = 0.8f, streak_amp = 40.0f, noise_sigma = 4.0f;
  const std::vector<float>& gauss = gaussian_table();
  std::vector<float> weight(static_cast<size_t>(width)), low(static_cast<size_t>(width)),
      high(static_cast<size_t>(width)), tint(static_cast<size_t>(width)), crisp(static_cast<size_t>(width));
  for (int y = 0; y < height; ++y) {
    std::fill(weight.begin(), weight.end(), 0.55f);
    mask.add_row(y, 0.75f, weight.data());
    for (float& w : weight) w = std::clamp(w, 0.3f, 1.0f);
    std::fill(low.begin(), low.end(), 0.0f);
    for (size_t o = 0; o < coarse.size(); ++o) coarse[o].add_row(y, kCoarseAmps[o], low.data(), weight.data());
    std::fill(high.begin(), high.end(), 0.0f);
    std::fill(crisp.begin(), crisp.end(), 0.0f);
    fine[0].add_row(y, kFineAmps[0], crisp.data());
    fine[1].add_row(y, kFineAmps[1], high.data(), weight.data());
    std::fill(tint.begin(), tint.end(), 0.0f);
    chroma.add_row(y, 8.0f, tint.data(), weight.data());
    float* b = base->data() + static_cast<size_t>(y) * width * 3;
    float* d = detail->data() + static_cast<size_t>(y) * width * 3;
    for (int x = 0; x < width; ++x) {
      // The scene's range is narrowed to 40..218 so that texture on it is rarely cut off.
      b[3 * x] = 40.0f + 0.7f * b[3 * x] + tint[x];
      b[3 * x + 1] = 40.0f + 0.7f * b[3 * x + 1];
      b[3 * x + 2] = 40.0f + 0.7f * b[3 * x + 2] - tint[x];
      const float fx = static_cast<float>(x), fy = static_cast<float>(y);
      const float su = (fx * sc + fy * ss + diagonal) / cu + 1, sv = (-fx * ss + fy * sc + diagonal) / cv + 1;
      const float streak = streak_noise(streaks, nu, su, sv);
      const float blobs = weight[x] * blob_amp * soft_sign(crisp[x]);
      const float texture = low[x] + high[x] + weight[x] * streak_amp * soft_sign(streak);
      // Blobs change colour slowly over the image (red-green leaves, grey-brown gravel).
      const float hue = std::clamp(tint[x] / 8.0f, -1.0f, 1.0f) * blob_chroma;
      const uint64_t bits = r.next();  // three 16-bit indices into the Gaussian table
      d[3 * x] = texture + blobs * (1.0f + hue) + noise_sigma * gauss[bits & 0xFFFF];
      d[3 * x + 1] = texture + blobs + noise_sigma * gauss[(bits >> 16) & 0xFFFF];
      d[3 * x + 2] = texture + blobs * (1.0f - hue) + noise_sigma * gauss[(bits >> 32) & 0xFFFF];
    }
  }
}

// Pixel value -> byte with soft limits: strong detail on a bright or dark field fades into the
// highlights and shadows, as on film or a sensor, instead of flattening into blocks of 0 or 255.
// A table over [-256, 512) in quarter steps; linear over 24..231.
uint8_t to_byte(float v) {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(3072);
    for (size_t i = 0; i < t.size(); ++i) {
      const float x = static_cast<float>(i) / 4.0f - 256.0f;
      const float y = x > 231.0f  ? 231.0f + 24.0f * std::tanh((x - 231.0f) / 24.0f)
                      : x < 24.0f ? 24.0f - 24.0f * std::tanh((24.0f - x) / 24.0f)
                                  : x;
      t[i] = static_cast<uint8_t>(std::clamp(y + 0.5f, 0.0f, 255.0f));
    }
    return t;
  }();
  return table[static_cast<size_t>(std::clamp((v + 256.0f) * 4.0f, 0.0f, 3071.0f))];
}

// base + amplitude * detail, in the pixel format the file is written in.
void compose(const std::vector<float>& base, const std::vector<float>& detail, float amplitude, JpegColour colour,
             std::vector<uint8_t>* pixels) {
  const size_t count = base.size() / 3;
  pixels->resize(count * (colour == JpegColour::kGrey ? 1 : colour == JpegColour::kCmyk ? 4 : 3));
  uint8_t* out = pixels->data();
  for (size_t i = 0; i < count; ++i) {
    const float r = base[3 * i] + amplitude * detail[3 * i];
    const float g = base[3 * i + 1] + amplitude * detail[3 * i + 1];
    const float b = base[3 * i + 2] + amplitude * detail[3 * i + 2];
    if (colour == JpegColour::kRgb) {
      out[3 * i] = to_byte(r);
      out[3 * i + 1] = to_byte(g);
      out[3 * i + 2] = to_byte(b);
    } else if (colour == JpegColour::kGrey) {
      out[i] = to_byte(0.299f * r + 0.587f * g + 0.114f * b);
    } else {
      // Adobe-inverted CMYK as libjpeg-turbo reads it back: R = C * K / 255 (and so on), K the max.
      const uint8_t rb = to_byte(r), gb = to_byte(g), bb = to_byte(b);
      const unsigned k = std::max({rb, gb, bb});
      out[4 * i + 3] = static_cast<uint8_t>(k);
      for (int c = 0; c < 3; ++c) {
        const unsigned v = c == 0 ? rb : c == 1 ? gb : bb;
        out[4 * i + c] = static_cast<uint8_t>(k == 0 ? 255 : std::min(255u, (v * 255 + k / 2) / k));
      }
    }
  }
}

// Scales the detail until the file at jpeg->quality lands near `target` bytes and inside 30-150 KiB;
// false when it cannot (jpeg->bytes then holds the closest try). The size grows with the
// amplitude, slower and slower as strong detail saturates: secant steps on log(size) over
// log(amplitude), kept inside the bracket found so far and below kMaxAmplitude.
bool fit_size(const std::vector<float>& base, const std::vector<float>& detail, double target, int format,
              int subsampling, JpegWriter& writer, double* amplitude, RealisticJpeg* jpeg) {
  constexpr double kMaxAmplitude = 16.0;  // reached by the smallest images only
  constexpr int kMaxEncodes = 8;
  std::vector<uint8_t> composed;
  double a = *amplitude, low = 0.0, high = kMaxAmplitude, best_score = 1e9;
  double last_log_a = 0, last_log_size = 0;
  bool fitted = false;
  for (int attempt = 0; attempt < kMaxEncodes; ++attempt) {
    compose(base, detail, static_cast<float>(a), jpeg->colour, &composed);
    const std::vector<uint8_t>& bytes =
        writer.encode(composed.data(), jpeg->width, jpeg->height, format, subsampling, jpeg->quality);
    ++jpeg->encodes;
    const double size = static_cast<double>(bytes.size());
    const double error = std::fabs(std::log(size / target));
    const bool in_range = size >= 30 * kKiB && size <= 150 * kKiB;
    const double score = error + (in_range ? 0.0 : 1000.0);  // any file in range beats one outside
    if (score < best_score) {
      best_score = score;
      jpeg->bytes = bytes;
      *amplitude = a;
      fitted = in_range;
    }
    if (error < 0.12 && in_range) break;             // close enough: the target itself has a 20% spread
    if (size < target && a >= kMaxAmplitude) break;  // as busy as it gets
    (size < target ? low : high) = a;
    const double log_a = std::log(a), log_size = std::log(size);
    double slope = 0.7;  // d log(size) / d log(amplitude) near amplitude 1
    if (attempt > 0 && std::fabs(log_a - last_log_a) > 1e-6) {
      slope = std::clamp((log_size - last_log_size) / (log_a - last_log_a), 0.1, 4.0);
    }
    last_log_a = log_a;
    last_log_size = log_size;
    double next = a * std::exp(std::clamp((std::log(target) - log_size) / slope, -2.0, 2.0));
    next = std::min(next, kMaxAmplitude);
    if (next <= low || (next >= high && high < kMaxAmplitude)) next = 0.5 * (low + high);
    a = next;
  }
  return fitted;
}

}  // namespace

JpegWriter::JpegWriter() : handle_(tjInitCompress()) {
  DTRAIN_CHECK(handle_ != nullptr) << "tjInitCompress failed: " << tjGetErrorStr2(nullptr);
}

JpegWriter::~JpegWriter() {
  if (buffer_ != nullptr) tjFree(buffer_);
  tjDestroy(handle_);
}

const std::vector<uint8_t>& JpegWriter::encode(const uint8_t* pixels, int width, int height, int pixel_format,
                                               int subsampling, int quality) {
  // TurboJPEG grows buffer_ when it must (no TJFLAG_NOREALLOC), so one buffer serves every image.
  unsigned long size = buffer_size_;
  if (tjCompress2(handle_, pixels, width, 0, height, pixel_format, &buffer_, &size, subsampling, quality, 0) != 0) {
    DTRAIN_FAIL() << "tjCompress2 " << width << "x" << height << " format " << pixel_format << " subsampling "
                  << subsampling << " quality " << quality << ": " << tjGetErrorStr2(handle_);
  }
  buffer_size_ = std::max(buffer_size_, size);
  out_.assign(buffer_, buffer_ + size);
  return out_;
}

RealisticJpeg make_realistic_jpeg(uint64_t seed, int split, int label, int index, JpegWriter& writer) {
  const uint64_t image_seed =
      hash_of({seed, static_cast<uint64_t>(split), static_cast<uint64_t>(label), static_cast<uint64_t>(index)});
  std::mt19937_64 rng(image_seed);
  std::uniform_real_distribution<double> u(0, 1);
  RealisticJpeg jpeg;
  draw_size(rng, &jpeg.width, &jpeg.height);
  // Quality 75-95, leaning high as Flickr's photos do; 1% grey, 1% CMYK, 12% of the rest 4:4:4.
  jpeg.quality = 75 + static_cast<int>(std::lround(20.0 * std::sqrt(u(rng))));
  const double kind = u(rng);
  jpeg.colour = kind < 0.01 ? JpegColour::kGrey : kind < 0.02 ? JpegColour::kCmyk : JpegColour::kRgb;
  jpeg.subsampling_444 = jpeg.colour != JpegColour::kGrey && u(rng) < 0.12;
  // The file size to aim for: ~110 KiB at 500x375, a little more for larger images, spread
  // log-normally, and always inside 30-150 KiB.
  const double pixels = static_cast<double>(jpeg.width) * jpeg.height;
  std::normal_distribution<double> spread(0, 0.2);
  const double target =
      std::clamp(115.0 * kKiB * std::pow(pixels / (500.0 * 375.0), 0.8) * std::exp(spread(rng)), 32 * kKiB, 145 * kKiB);

  const ClassLook look = class_look(seed, label);
  std::vector<float> base, detail;
  paint_base(look, rng, jpeg.width, jpeg.height, &base);
  SplitMix r{image_seed ^ 0xDE7A11ull};
  paint_texture(look, r, jpeg.width, jpeg.height, &base, &detail);

  const int format = jpeg.colour == JpegColour::kGrey   ? TJPF_GRAY
                     : jpeg.colour == JpegColour::kCmyk ? TJPF_CMYK
                                                        : TJPF_RGB;
  const int subsampling = jpeg.colour == JpegColour::kGrey ? TJSAMP_GRAY
                          : jpeg.subsampling_444           ? TJSAMP_444
                                                           : TJSAMP_420;
  double amplitude = 1.0;
  bool fitted = fit_size(base, detail, target, format, subsampling, writer, &amplitude, &jpeg);
  // Rare (about 1 file in 10,000): a large image whose objects alone pass 150 KiB at its quality, or
  // a small one that cannot reach 30 KiB. Its quality moves, beyond 75-95 if need be, and is counted.
  for (int step = 0; !fitted && step < 4; ++step) {
    const bool too_large = static_cast<double>(jpeg.bytes.size()) > 150 * kKiB;
    jpeg.quality = std::clamp(jpeg.quality + (too_large ? -6 : 2), 30, 100);
    jpeg.quality_moved = true;
    fitted = fit_size(base, detail, target, format, subsampling, writer, &amplitude, &jpeg);
  }
  return jpeg;
}

}  // namespace dtrain::test
