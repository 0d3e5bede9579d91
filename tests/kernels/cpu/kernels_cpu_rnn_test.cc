// RNN, GRU and LSTM against a double-precision reference written from ONNX's equations, in every
// storage type, over what the ONNX node tests leave out: two directions, sequence lengths that
// end rows early (reverse rows start at their own last step), layout 1, initial states,
// peepholes, GRU's linear_before_reset both ways, omitted outputs; and the refusals.
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using testing::EmptyTensor;
using testing::MakeTensor;
using testing::RandomValues;
using testing::RunKernel;
using testing::TestTensor;
using testing::ToDoubles;
using ::testing::HasSubstr;

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

struct Sizes {
  int64_t seq = 4, batch = 3, input = 5, hidden = 6, dirs = 2;
};

// The reference: Y [seq, dirs, batch, hidden] and the final states [dirs, batch, hidden], all
// in layout 0, from inputs in layout 0.
struct Reference {
  std::vector<double> y, h, c;
};

enum class Cell { kGru, kLstm };

Reference Recur(Cell cell, const Sizes& s, bool lbr, const std::vector<double>& x,
                const std::vector<double>& w, const std::vector<double>& r,
                const std::vector<double>& b, const std::vector<int64_t>& lens,
                const std::vector<double>& h0, const std::vector<double>& c0,
                const std::vector<double>& p) {
  const int64_t H = s.hidden, I = s.input, G = cell == Cell::kGru ? 3 : 4;
  Reference out;
  out.y.assign(s.seq * s.dirs * s.batch * H, 0.0);
  out.h.assign(s.dirs * s.batch * H, 0.0);
  out.c = out.h;
  for (int64_t d = 0; d < s.dirs; ++d) {
    for (int64_t bt = 0; bt < s.batch; ++bt) {
      std::vector<double> h(h0.begin() + (d * s.batch + bt) * H,
                            h0.begin() + (d * s.batch + bt + 1) * H);
      std::vector<double> c(c0.begin() + (d * s.batch + bt) * H,
                            c0.begin() + (d * s.batch + bt + 1) * H);
      for (int64_t k = 0; k < lens[bt]; ++k) {
        const int64_t t = d == 1 ? lens[bt] - 1 - k : k;
        // gate g, unit j: x W^T + Wb (xw) and h R^T + Rb (hr).
        auto xw = [&](int64_t g, int64_t j) {
          double v = b[d * 2 * G * H + g * H + j];
          for (int64_t i = 0; i < I; ++i) {
            v += x[(t * s.batch + bt) * I + i] * w[((d * G + g) * H + j) * I + i];
          }
          return v;
        };
        auto hr = [&](int64_t g, int64_t j, const std::vector<double>& state) {
          double v = b[d * 2 * G * H + G * H + g * H + j];
          for (int64_t i = 0; i < H; ++i) v += state[i] * r[((d * G + g) * H + j) * H + i];
          return v;
        };
        std::vector<double> next(H), next_c(H);
        for (int64_t j = 0; j < H; ++j) {
          if (cell == Cell::kGru) {
            const double z = Sigmoid(xw(0, j) + hr(0, j, h));
            std::vector<double> rh(H);
            for (int64_t i = 0; i < H; ++i) rh[i] = Sigmoid(xw(1, i) + hr(1, i, h)) * h[i];
            const double rj = Sigmoid(xw(1, j) + hr(1, j, h));
            const double cand = std::tanh(xw(2, j) + (lbr ? rj * hr(2, j, h) : hr(2, j, rh)));
            next[j] = (1 - z) * cand + z * h[j];
          } else {
            const double pi = p[d * 3 * H + j], po = p[d * 3 * H + H + j],
                         pf = p[d * 3 * H + 2 * H + j];
            const double i = Sigmoid(xw(0, j) + hr(0, j, h) + pi * c[j]);
            const double f = Sigmoid(xw(2, j) + hr(2, j, h) + pf * c[j]);
            const double g = std::tanh(xw(3, j) + hr(3, j, h));
            next_c[j] = f * c[j] + i * g;
            const double o = Sigmoid(xw(1, j) + hr(1, j, h) + po * next_c[j]);
            next[j] = o * std::tanh(next_c[j]);
          }
        }
        h = next;
        if (cell == Cell::kLstm) c = next_c;
        for (int64_t j = 0; j < H; ++j) out.y[((t * s.dirs + d) * s.batch + bt) * H + j] = h[j];
      }
      for (int64_t j = 0; j < H; ++j) {
        out.h[(d * s.batch + bt) * H + j] = h[j];
        out.c[(d * s.batch + bt) * H + j] = c[j];
      }
    }
  }
  return out;
}

double Tolerance(DataType d) {
  return d == DataType::kFloat16 ? 1e-2 : d == DataType::kBFloat16 ? 6e-2 : 1e-5;
}

void ExpectClose(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
  }
}

// Layout 0 [a, b, rest] as layout 1 [b, a, rest] (and back: the same swap).
std::vector<double> SwapLeading(const std::vector<double>& v, int64_t a, int64_t b,
                                int64_t rest) {
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      for (int64_t k = 0; k < rest; ++k) out[(j * a + i) * rest + k] = v[(i * b + j) * rest + k];
    }
  }
  return out;
}

class RecurrentTest : public ::testing::TestWithParam<DataType> {};

TEST_P(RecurrentTest, BidirectionalLstmWithLengthsStatesAndPeepholesInBothLayouts) {
  const DataType dtype = GetParam();
  const Sizes s;
  const int64_t H = s.hidden, G = 4;
  // Values as the storage type holds them, so the reference sees the same inputs.
  auto stored = [&](std::vector<int64_t> dims, uint64_t seed, double scale) {
    std::vector<double> v = RandomValues(testing::Count(dims), seed, -scale, scale);
    return ToDoubles(MakeTensor(dtype, dims, v));
  };
  const std::vector<double> x = stored({s.seq, s.batch, s.input}, 1, 1);
  const std::vector<double> w = stored({s.dirs, G * H, s.input}, 2, 0.5);
  const std::vector<double> r = stored({s.dirs, G * H, H}, 3, 0.5);
  const std::vector<double> b = stored({s.dirs, 2 * G * H}, 4, 0.3);
  const std::vector<double> h0 = stored({s.dirs, s.batch, H}, 5, 0.5);
  const std::vector<double> c0 = stored({s.dirs, s.batch, H}, 6, 0.5);
  const std::vector<double> p = stored({s.dirs, 3 * H}, 7, 0.3);
  const std::vector<int64_t> lens = {4, 2, 0};
  const Reference ref = Recur(Cell::kLstm, s, false, x, w, r, b, lens, h0, c0, p);

  for (int layout : {0, 1}) {
    SCOPED_TRACE(layout);
    TestTensor tx = layout == 0 ? MakeTensor(dtype, {s.seq, s.batch, s.input}, x)
                                : MakeTensor(dtype, {s.batch, s.seq, s.input},
                                             SwapLeading(x, s.seq, s.batch, s.input));
    TestTensor tw = MakeTensor(dtype, {s.dirs, G * H, s.input}, w);
    TestTensor tr = MakeTensor(dtype, {s.dirs, G * H, H}, r);
    TestTensor tb = MakeTensor(dtype, {s.dirs, 2 * G * H}, b);
    TestTensor tlens = MakeTensor(DataType::kInt32, {s.batch}, {4, 2, 0});
    const std::vector<int64_t> state = layout == 0 ? std::vector<int64_t>{s.dirs, s.batch, H}
                                                   : std::vector<int64_t>{s.batch, s.dirs, H};
    TestTensor th0 = MakeTensor(dtype, state, layout == 0 ? h0 : SwapLeading(h0, s.dirs, s.batch, H));
    TestTensor tc0 = MakeTensor(dtype, state, layout == 0 ? c0 : SwapLeading(c0, s.dirs, s.batch, H));
    TestTensor tp = MakeTensor(dtype, {s.dirs, 3 * H}, p);
    TestTensor y = layout == 0 ? EmptyTensor(dtype, {s.seq, s.dirs, s.batch, H})
                               : EmptyTensor(dtype, {s.batch, s.seq, s.dirs, H});
    TestTensor yh = EmptyTensor(dtype, state), yc = EmptyTensor(dtype, state);
    ASSERT_TRUE(RunKernel("LSTM",
                          {{"direction", std::string("bidirectional")},
                           {"hidden_size", H}, {"layout", int64_t{layout}}},
                          {&tx, &tw, &tr, &tb, &tlens, &th0, &tc0, &tp}, {&y, &yh, &yc})
                    .ok());
    std::vector<double> got_y = ToDoubles(y), got_h = ToDoubles(yh), got_c = ToDoubles(yc);
    if (layout == 1) {
      got_y = SwapLeading(got_y, s.batch, s.seq, s.dirs * H);  // [seq, batch, dirs, H]
      std::vector<double> v(got_y.size());                      // to [seq, dirs, batch, H]
      for (int64_t t = 0; t < s.seq; ++t)
        for (int64_t bt = 0; bt < s.batch; ++bt)
          for (int64_t d = 0; d < s.dirs; ++d)
            for (int64_t j = 0; j < H; ++j)
              v[((t * s.dirs + d) * s.batch + bt) * H + j] =
                  got_y[((t * s.batch + bt) * s.dirs + d) * H + j];
      got_y = v;
      got_h = SwapLeading(got_h, s.batch, s.dirs, H);
      got_c = SwapLeading(got_c, s.batch, s.dirs, H);
    }
    ExpectClose(got_y, ref.y, Tolerance(dtype), "Y");
    ExpectClose(got_h, ref.h, Tolerance(dtype), "Y_h");
    ExpectClose(got_c, ref.c, Tolerance(dtype), "Y_c");
  }
}

TEST_P(RecurrentTest, GruBothResetOrdersReverseAndOmittedOutputs) {
  const DataType dtype = GetParam();
  Sizes s;
  s.dirs = 1;
  const int64_t H = s.hidden, G = 3;
  auto stored = [&](std::vector<int64_t> dims, uint64_t seed, double scale) {
    std::vector<double> v = RandomValues(testing::Count(dims), seed, -scale, scale);
    return ToDoubles(MakeTensor(dtype, dims, v));
  };
  const std::vector<double> x = stored({s.seq, s.batch, s.input}, 11, 1);
  const std::vector<double> w = stored({1, G * H, s.input}, 12, 0.5);
  const std::vector<double> r = stored({1, G * H, H}, 13, 0.5);
  const std::vector<double> b = stored({1, 2 * G * H}, 14, 0.3);
  const std::vector<double> zeros(s.batch * H, 0.0);
  const std::vector<int64_t> full(s.batch, s.seq);
  for (bool lbr : {false, true}) {
    SCOPED_TRACE(lbr);
    Reference ref = Recur(Cell::kGru, s, lbr, x, w, r, b, full, zeros, zeros, {});
    TestTensor tx = MakeTensor(dtype, {s.seq, s.batch, s.input}, x);
    TestTensor tw = MakeTensor(dtype, {1, G * H, s.input}, w);
    TestTensor tr = MakeTensor(dtype, {1, G * H, H}, r);
    TestTensor tb = MakeTensor(dtype, {1, 2 * G * H}, b);
    TestTensor y = EmptyTensor(dtype, {s.seq, 1, s.batch, H});
    ASSERT_TRUE(RunKernel("GRU", {{"linear_before_reset", int64_t{lbr}}}, {&tx, &tw, &tr, &tb},
                          {&y})
                    .ok());
    ExpectClose(ToDoubles(y), ref.y, Tolerance(dtype), "Y");

    // Reverse: the sequence read backwards; only Y_h written (Y omitted: output slot 1).
    std::vector<double> reversed(x.size());
    for (int64_t t = 0; t < s.seq; ++t) {
      std::copy_n(x.begin() + (s.seq - 1 - t) * s.batch * s.input, s.batch * s.input,
                  reversed.begin() + t * s.batch * s.input);
    }
    ref = Recur(Cell::kGru, s, lbr, reversed, w, r, b, full, zeros, zeros, {});
    TestTensor yh = EmptyTensor(dtype, {1, s.batch, H});
    ASSERT_TRUE(RunKernel("GRU",
                          {{"linear_before_reset", int64_t{lbr}},
                           {"direction", std::string("reverse")},
                           {"onnx_output_slots", std::vector<int64_t>{1}}},
                          {&tx, &tw, &tr, &tb}, {&yh})
                    .ok());
    ExpectClose(ToDoubles(yh), ref.h, Tolerance(dtype), "Y_h");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RecurrentTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16,
                                           DataType::kBFloat16, DataType::kFloat64));

TEST(RecurrentTest, RefusesContradictoryShapesLengthsAndUnsupportedOptions) {
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 1, 3}, RandomValues(6, 1));
  TestTensor w = MakeTensor(DataType::kFloat32, {1, 8, 3}, RandomValues(24, 2));
  TestTensor r = MakeTensor(DataType::kFloat32, {1, 8, 2}, RandomValues(16, 3));
  TestTensor y = EmptyTensor(DataType::kFloat32, {2, 1, 1, 2});
  EXPECT_TRUE(RunKernel("LSTM", {}, {&x, &w, &r}, {&y}).ok());
  // GRU reads the same W as 8 / 3 gates: not a whole number of gates of R's hidden size.
  absl::Status s = RunKernel("GRU", {}, {&x, &w, &r}, {&y});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("W has dims"));
  s = RunKernel("LSTM", {{"hidden_size", int64_t{3}}}, {&x, &w, &r}, {&y});
  EXPECT_THAT(s.message(), HasSubstr("hidden_size 3 contradicts"));
  TestTensor b = MakeTensor(DataType::kFloat32, {1, 16}, RandomValues(16, 4));
  TestTensor too_long = MakeTensor(DataType::kInt32, {1}, {3});
  s = RunKernel("LSTM", {}, {&x, &w, &r, &b, &too_long}, {&y});
  EXPECT_THAT(s.message(), HasSubstr("sequence_lens[0] = 3 is outside [0, 2]"));
  s = RunKernel("LSTM", {{"input_forget", int64_t{1}}}, {&x, &w, &r}, {&y});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  s = RunKernel("LSTM", {{"activations", std::vector<std::string>{"Sigmoid", "Swish", "Tanh"}}},
                {&x, &w, &r}, {&y});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  // The output over an input: refused, not computed over the weights it still reads.
  s = RunKernel("LSTM", {}, {&x, &w, &r}, {&w});
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace memonger::alloc
