// The scratch application of uppy/browser_test.go: an Uppy Dashboard page,
// as an application on @uppy/aws-s3 would have it, with @onceupload/uppy
// in place of that plugin, and Golden Retriever. It is bundled with esbuild
// (build.mjs) from the packed tarballs installed beside it, and served by
// the local stack at the API's own origin.
//
// What the test reads: every upload-success and upload-error, appended to
// localStorage "app-events" (so that they count across a reload), and
// html[data-ready] once Uppy is set up. The query sets the client's
// multipart threshold (?multipartBytes=, ?partBytes=: the stack's parts are
// 5 MiB) and what the client keeps of a file (?keepFileBytes=); Golden
// Retriever and ?autoResume=1 are below.
import Uppy from "@uppy/core";
import Dashboard from "@uppy/dashboard";
import GoldenRetriever from "@uppy/golden-retriever";
import OnceUpload, { type OnceUploadBody } from "@onceupload/uppy";
import "@uppy/core/css/style.min.css";
import "@uppy/dashboard/css/style.min.css";

const query = new URLSearchParams(location.search);
const num = (name: string, fallback: number) => Number(query.get(name) ?? fallback);
const MiB = 1 << 20;

interface AppEvent {
  type: "upload-success" | "upload-error";
  name: string;
  fileId: string;
  body?: OnceUploadBody;
  message?: string;
}

function record(e: AppEvent): void {
  const events = JSON.parse(localStorage.getItem("app-events") ?? "[]") as AppEvent[];
  events.push(e);
  localStorage.setItem("app-events", JSON.stringify(events));
}

const uppy = new Uppy<Record<string, never>, OnceUploadBody>({ id: "app" }).use(Dashboard, { inline: true, target: "#uppy", proudlyDisplayPoweredByUppy: false });
// Golden Retriever (not with ?goldenRetriever=0): its blobs are kept up to
// 10 MiB (its default), so a larger file comes back after a reload without
// its bytes (a ghost).
if (query.get("goldenRetriever") !== "0") uppy.use(GoldenRetriever);
uppy.use(OnceUpload, {
    apiBase: location.origin,
    hashWorkerUrl: "/assets/hash-worker.js",
    multipartBytes: num("multipartBytes", 64 * MiB),
    partBytes: num("partBytes", 8 * MiB),
    keepFileBytes: num("keepFileBytes", 64 * MiB),
  });

uppy.on("upload-success", (file, response) => {
  record({ type: "upload-success", name: file?.name ?? "", fileId: file?.id ?? "", body: response.body });
});
uppy.on("upload-error", (file, error) => {
  record({ type: "upload-error", name: file?.name ?? "", fileId: file?.id ?? "", message: error.message });
});

// Some applications resume a restored upload at once instead of waiting for
// the Dashboard's button (?autoResume=1): Golden Retriever then resumes it,
// whether or not its files' bytes were restored.
if (query.get("autoResume") === "1") {
  uppy.on("restored", () => setTimeout(() => uppy.emit("restore-confirmed")));
}

document.documentElement.dataset.ready = "true";
