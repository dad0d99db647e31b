// LaggingStreamsAdaptor: a replay's device that runs a fixed number of events behind the host. Markers are
// reached `lag` events after they are recorded, or when the host waits for them; a synchronization catches
// the device up; the waits and the GPU events they covered are counted.
#include "allocator/lagging_streams_adaptor.h"

#include <gtest/gtest.h>

#include "allocator/virtual_backend.h"

namespace memcoord {
namespace {

TEST(LaggingStreams, AMarkerIsReachedLagEventsAfterItWasRecorded) {
  VirtualBackend device;
  LaggingStreamsAdaptor lagging(device, 3);
  lagging.advance();
  const MarkerId m = lagging.record_marker(kDefaultStream);  // after event 1
  EXPECT_NE(m, kNoMarker);
  lagging.advance();
  lagging.advance();
  EXPECT_FALSE(lagging.marker_reached(m));  // the device finished event 0 only
  EXPECT_FALSE(lagging.stream_idle(kDefaultStream));
  lagging.advance();
  EXPECT_TRUE(lagging.marker_reached(m));  // event 4: the device is through event 1
  EXPECT_FALSE(lagging.stream_idle(kDefaultStream));
  EXPECT_EQ(lagging.waits(), 0u);
  lagging.release_marker(m);
}

TEST(LaggingStreams, AWaitCatchesTheDeviceUpToTheMarkerOnlyAndIsCounted) {
  VirtualBackend device;
  LaggingStreamsAdaptor lagging(device, 100);
  for (int i = 0; i < 10; ++i) lagging.advance();
  const MarkerId early = lagging.record_marker(kDefaultStream);  // after event 10
  for (int i = 0; i < 10; ++i) lagging.advance();
  const MarkerId late = lagging.record_marker(kDefaultStream);  // after event 20
  ASSERT_TRUE(lagging.wait_marker(early).ok());
  EXPECT_TRUE(lagging.marker_reached(early));
  EXPECT_FALSE(lagging.marker_reached(late));  // the work queued after `early` still runs
  EXPECT_EQ(lagging.waits(), 1u);
  EXPECT_EQ(lagging.waited_events(), 10u);
  ASSERT_TRUE(lagging.wait_marker(early).ok());  // reached: no wait
  EXPECT_EQ(lagging.waits(), 1u);
  ASSERT_TRUE(lagging.synchronize(kDefaultStream).ok());
  EXPECT_TRUE(lagging.marker_reached(late));
  EXPECT_TRUE(lagging.stream_idle(kDefaultStream));
  EXPECT_EQ(lagging.synchronizations(), 1u);
  EXPECT_EQ(lagging.waited_events(), 20u);
  lagging.release_marker(early);
  lagging.release_marker(late);
}

TEST(LaggingStreams, AWaitForAMarkerNotOutstandingIsAnErrorThatSaysSo) {
  VirtualBackend device;
  LaggingStreamsAdaptor lagging(device, 5);
  const MarkerId m = lagging.record_marker(kDefaultStream);
  lagging.release_marker(m);
  const Status s = lagging.wait_marker(m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not outstanding"), std::string::npos) << s.ToString();
}

TEST(LaggingStreams, MappingAndAllocationGoToTheDeviceBelow) {
  VirtualBackend device;
  LaggingStreamsAdaptor lagging(device, 5);
  EXPECT_EQ(lagging.chunk_bytes(), device.chunk_bytes());
  Result<void*> p = lagging.allocate(1 << 20);
  ASSERT_TRUE(p.ok());
  lagging.release(*p, 1 << 20);
  EXPECT_EQ(lagging.kind(), device.kind());
}

}  // namespace
}  // namespace memcoord
