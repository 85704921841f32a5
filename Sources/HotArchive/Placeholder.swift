import HotCore
