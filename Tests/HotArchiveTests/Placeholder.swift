import HotArchive
import HotCore
import Testing
