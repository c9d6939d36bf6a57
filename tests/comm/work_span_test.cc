// comm::Work::span (the timeline's source of truth on the CPU path): a host operation's span is
// when it really ran on the comm worker (or inline on the caller), on the steady clock; queued
// operations run one after the other; all_of spans its parts; unknown spans are NaN.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "comm/host/comm_worker.h"
#include "comm/work.h"
#include "runtime/base/steady_seconds.h"

namespace dtrain::comm {
namespace {

double now() {
  return runtime::steady_seconds();
}

TEST(WorkSpan, IsWhenTheOperationRanOnTheWorker) {
  CommWorker worker;
  double ran_from = 0, ran_to = 0;
  const double submitted = now();
  // The first operation holds the worker, so the second one waits in the queue: its span must
  // start when it ran, not when it was submitted.
  Work first = worker.submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  Work second = worker.submit([&] {
    ran_from = now();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ran_to = now();
  });
  second.wait();
  const double waited = now();
  const Work::Span a = first.span();
  const Work::Span b = second.span();
  ASSERT_FALSE(std::isnan(a.begin) || std::isnan(a.end) || std::isnan(b.begin) || std::isnan(b.end));
  EXPECT_LE(submitted, a.begin);
  EXPECT_GE(a.end - a.begin, 0.019);
  EXPECT_LE(a.end, b.begin);  // one after the other on the worker
  EXPECT_LE(b.begin, ran_from);
  EXPECT_LE(ran_to, b.end);
  EXPECT_LE(b.end, waited);
  EXPECT_GE(b.begin - submitted, 0.019) << "the queued operation's span began at its submission";
}

TEST(WorkSpan, InlineOperationsAndFailuresHaveOneToo) {
  CommWorker worker;
  const double before = now();
  Work inline_work = worker.run_inline_if_idle([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
  Work failed = worker.submit([] { throw std::runtime_error("injected"); });
  EXPECT_THROW(failed.wait(), std::runtime_error);
  const double after = now();
  for (const Work& w : {inline_work, failed}) {
    const Work::Span s = w.span();
    EXPECT_LE(before, s.begin);
    EXPECT_LE(s.begin, s.end);
    EXPECT_LE(s.end, after);
  }
  EXPECT_GE(inline_work.span().end - inline_work.span().begin, 0.0019);
}

TEST(WorkSpan, UnknownIsNanAndAllOfSpansItsParts) {
  EXPECT_TRUE(std::isnan(Work().span().begin));
  Work pending = Work::pending();
  EXPECT_TRUE(std::isnan(pending.span().end)) << "not done yet";
  CommWorker worker;
  Work a = worker.submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(3)); });
  Work b = worker.submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(3)); });
  Work both = Work::all_of({a, b});
  both.wait();
  EXPECT_EQ(both.span().begin, a.span().begin);
  EXPECT_EQ(both.span().end, b.span().end);
  EXPECT_TRUE(std::isnan(Work::all_of({a, Work()}).span().begin)) << "a part without a span";
  pending.complete();
}

}  // namespace
}  // namespace dtrain::comm
