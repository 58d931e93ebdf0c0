package genie

import (
	"testing"

	"genie.dev/genie/internal/capi"
)

// The Go constants restate frozen values of the header: check them against
// what SWIG read from it.
func TestConstantsMatchHeader(t *testing.T) {
	pairs := []struct {
		name      string
		got, want int
	}{
		{"F32", int(F32), int(capi.GENIE_DTYPE_F32)},
		{"F16", int(F16), int(capi.GENIE_DTYPE_F16)},
		{"BF16", int(BF16), int(capi.GENIE_DTYPE_BF16)},
		{"I32", int(I32), int(capi.GENIE_DTYPE_I32)},
		{"I64", int(I64), int(capi.GENIE_DTYPE_I64)},
		{"Bool", int(Bool), int(capi.GENIE_DTYPE_BOOL)},
		{"PhaseUnknown", int(PhaseUnknown), int(capi.GENIE_PHASE_UNKNOWN)},
		{"PhasePrefill", int(PhasePrefill), int(capi.GENIE_PHASE_PREFILL)},
		{"PhaseDecode", int(PhaseDecode), int(capi.GENIE_PHASE_DECODE)},
		{"PhaseForward", int(PhaseForward), int(capi.GENIE_PHASE_FORWARD)},
		{"PhaseBackward", int(PhaseBackward), int(capi.GENIE_PHASE_BACKWARD)},
		{"ModalityUnknown", int(ModalityUnknown), int(capi.GENIE_MODALITY_UNKNOWN)},
		{"ModalityText", int(ModalityText), int(capi.GENIE_MODALITY_TEXT)},
		{"ModalityVision", int(ModalityVision), int(capi.GENIE_MODALITY_VISION)},
		{"ModalityAudio", int(ModalityAudio), int(capi.GENIE_MODALITY_AUDIO)},
		{"RoleUnspecified", int(RoleUnspecified), int(capi.GENIE_TENSOR_ROLE_UNSPECIFIED)},
		{"RoleWeight", int(RoleWeight), int(capi.GENIE_TENSOR_ROLE_WEIGHT)},
		{"RoleActivation", int(RoleActivation), int(capi.GENIE_TENSOR_ROLE_ACTIVATION)},
		{"RoleKVCache", int(RoleKVCache), int(capi.GENIE_TENSOR_ROLE_KV_CACHE)},
		{"RoleInput", int(RoleInput), int(capi.GENIE_TENSOR_ROLE_INPUT)},
		{"RoleOutput", int(RoleOutput), int(capi.GENIE_TENSOR_ROLE_OUTPUT)},
		{"MaxDims", MaxDims, capi.GENIE_MAX_DIMS},
		{"EventNodeJoined", int(EventNodeJoined), int(capi.GENIE_EVENT_NODE_JOINED)},
		{"EventNodeLost", int(EventNodeLost), int(capi.GENIE_EVENT_NODE_LOST)},
		{"EventNodeRecovered", int(EventNodeRecovered), int(capi.GENIE_EVENT_NODE_RECOVERED)},
		{"EventGPUAvailable", int(EventGPUAvailable), int(capi.GENIE_EVENT_GPU_AVAILABLE)},
		{"EventGPUUnavailable", int(EventGPUUnavailable), int(capi.GENIE_EVENT_GPU_UNAVAILABLE)},
		{"EventGPUOverheated", int(EventGPUOverheated), int(capi.GENIE_EVENT_GPU_OVERHEATED)},
		{"EventHealthChanged", int(EventHealthChanged), int(capi.GENIE_EVENT_HEALTH_CHANGED)},
		{"EventBackendSelected", int(EventBackendSelected), int(capi.GENIE_EVENT_BACKEND_SELECTED)},
		{"EventAll", int(EventAll), int(capi.GENIE_EVENT_ALL)},
	}
	for _, p := range pairs {
		if p.got != p.want {
			t.Errorf("%s = %d, header says %d", p.name, p.got, p.want)
		}
	}
}
