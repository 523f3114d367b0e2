// The GraphQL operations the annotator sends, with the fields it reads of their answers.

const VIDEO = "id path width height frameCount fps";
const FRAME_MASKS = "frameIndex rleMaskList { objectId rleMask { size counts } }";
export const Q = {
  video: `query Video($id: GlobalID!) { node(id: $id) { ... on Video { ${VIDEO} } } }`,
  defaultVideo: `query DefaultVideo { defaultVideo { ${VIDEO} } }`,
  start: `mutation Start($input: StartSessionInput!) { startSession(input: $input) { sessionId } }`,
  close: `mutation Close($input: CloseSessionInput!) { closeSession(input: $input) { success } }`,
  ping: `query Ping($input: PingInput!) { ping(input: $input) { success } }`,
  addPoints: `mutation Add($input: AddPointsInput!) { addPoints(input: $input) { ${FRAME_MASKS} } }`,
  clearFrame: `mutation ClearFrame($input: ClearPointsInFrameInput!) {
    clearPointsInFrame(input: $input) { ${FRAME_MASKS} } }`,
  clearVideo: `mutation ClearVideo($input: ClearPointsInVideoInput!) {
    clearPointsInVideo(input: $input) { success } }`,
  removeObject: `mutation Remove($input: RemoveObjectInput!) { removeObject(input: $input) { ${FRAME_MASKS} } }`,
  uploadAnnotations: `mutation Import($file: Upload!) { uploadAnnotations(file: $file) }`,
};
